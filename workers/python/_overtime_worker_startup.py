"""Run at interpreter start-up, only under Overtime: by ``overtime_worker.pth`` when the
package is pip-installed, by ``sitecustomize.py`` when ``workers/python`` is on PYTHONPATH.

Arranges for ``overtime_worker.tqdm_bridge.patch()`` to run right after ``tqdm.std`` is
first imported, ``overtime_worker.rich_bridge.patch()`` after ``rich.progress``, and
``overtime_worker.lightning_bridge`` after Lightning's tqdm callback, so that tqdm and rich
bars report progress without any change to the program. Imports
nothing but ``os`` and ``sys``; tqdm, rich and ``overtime_worker`` are loaded only if the
program imports them. ``OVERTIME_BRIDGE=0`` turns both bridges off, ``OVERTIME_TQDM=0``
or ``OVERTIME_RICH=0`` one of them.
"""

import os
import sys

_OFF = ("0", "false", "no", "off")
# module whose execution is followed by the bridge -> (opt-out variable, bridge module)
_BRIDGES = {
    "tqdm.std": ("OVERTIME_TQDM", "tqdm_bridge"),
    "rich.progress": ("OVERTIME_RICH", "rich_bridge"),
    # Lightning's tqdm callback, which moves its bars only every refresh_rate steps.
    "lightning.pytorch.callbacks.progress.tqdm_progress": ("OVERTIME_TQDM", "lightning_bridge"),
    "pytorch_lightning.callbacks.progress.tqdm_progress": ("OVERTIME_TQDM", "lightning_bridge"),
}


def _off(name, environ):
    return environ.get(name, "1").strip().lower() in _OFF


def wanted(environ=None):
    """The modules to bridge in this process: none outside Overtime or when turned off."""
    environ = os.environ if environ is None else environ
    if not (environ.get("OVERTIME_FD") or environ.get("OVERTIME_SOCKET")) or _off("OVERTIME_BRIDGE", environ):
        return ()
    return tuple(target for target, (variable, _) in _BRIDGES.items() if not _off(variable, environ))


class BridgeImportHook(object):
    """A meta path finder that bridges each target module once it has executed, and
    leaves once every target has been seen."""

    def __init__(self, targets):
        self.targets = set(targets)

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in self.targets:
            return None
        self.targets.discard(fullname)
        if not self.targets:
            self._leave()
        spec = None
        for finder in list(sys.meta_path):
            find_spec = getattr(finder, "find_spec", None)
            if finder is self or find_spec is None or isinstance(finder, BridgeImportHook):
                continue
            spec = find_spec(fullname, path, target)
            if spec is not None:
                break
        loader = getattr(spec, "loader", None)
        exec_module = getattr(loader, "exec_module", None)
        if exec_module is None:
            return spec

        def exec_then_bridge(module):
            try:
                del loader.exec_module   # one module only: some loaders serve many
            except AttributeError:
                pass
            exec_module(module)
            if getattr(module, "__name__", None) == fullname:
                bridge(fullname, module)

        try:
            loader.exec_module = exec_then_bridge
        except AttributeError:
            pass
        return spec

    def _leave(self):
        try:
            sys.meta_path.remove(self)
        except ValueError:
            pass


def bridge(target, module):
    name = _BRIDGES[target][1]
    try:
        bridge_module = __import__("overtime_worker." + name, fromlist=["patch"])
        bridge_module.patch_module(module)
    except Exception as error:  # the program runs on, unbridged, and says so once
        what = "rich" if target.startswith("rich") else ("Lightning's" if "lightning" in target else "tqdm")
        sys.stderr.write("overtime_worker: {} bars will not report progress: {}\n".format(what, error))


def install():
    """Called at start-up under Overtime; once is enough (the .pth line and
    sitecustomize may both call it)."""
    try:
        if any(isinstance(f, BridgeImportHook) for f in sys.meta_path) or getattr(sys, "_overtime_bridges", False):
            return
        sys._overtime_bridges = True
        later = []
        for target in wanted():
            if target in sys.modules:
                bridge(target, sys.modules[target])
            else:
                later.append(target)
        if later:
            sys.meta_path.insert(0, BridgeImportHook(later))
    except Exception:
        pass
