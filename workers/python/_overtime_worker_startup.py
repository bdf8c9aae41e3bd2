"""Run at interpreter start-up, only under Overtime: by ``overtime_worker.pth`` when the
package is pip-installed, by ``sitecustomize.py`` when ``workers/python`` is on PYTHONPATH.

Arranges for each framework's bridge (``overtime_worker.*_bridge``) to run right after the
framework's module named in ``_BRIDGES`` is first imported, so that tqdm and rich bars,
Lightning's loops, Keras, Hugging Face's Trainer and joblib report progress without any
change to the program. Imports nothing but ``os`` and ``sys``; no framework and not
``overtime_worker`` is loaded unless the program imports it. ``OVERTIME_BRIDGE=0`` turns
every bridge off; each framework's own variable (``OVERTIME_TQDM=0``, ``OVERTIME_KERAS=0``,
…) one of them.
"""

import os
import sys

_OFF = ("0", "false", "no", "off")
# module whose execution is followed by the bridge ->
#   (opt-out variables: any one set to 0 turns it off, bridge module, its function)
_BRIDGES = {
    "tqdm.std": (("OVERTIME_TQDM",), "tqdm_bridge", "patch_module"),
    "rich.progress": (("OVERTIME_RICH",), "rich_bridge", "patch_module"),
    # Lightning's tqdm callback, which moves its bars only every refresh_rate steps.
    "lightning.pytorch.callbacks.progress.tqdm_progress": (("OVERTIME_TQDM", "OVERTIME_LIGHTNING"), "lightning_bridge", "patch_module"),
    "pytorch_lightning.callbacks.progress.tqdm_progress": (("OVERTIME_TQDM", "OVERTIME_LIGHTNING"), "lightning_bridge", "patch_module"),
    # Lightning with no progress bar: a callback that reports its loops.
    "lightning.pytorch.trainer.connectors.callback_connector": (("OVERTIME_LIGHTNING",), "lightning_bridge", "patch_connector"),
    "pytorch_lightning.trainer.connectors.callback_connector": (("OVERTIME_LIGHTNING",), "lightning_bridge", "patch_connector"),
    # Lightning's checkpoint phase, and fit/test/... ending in the phase they began in.
    "lightning.pytorch.trainer.trainer": (("OVERTIME_LIGHTNING",), "lightning_bridge", "patch_trainer"),
    "pytorch_lightning.trainer.trainer": (("OVERTIME_LIGHTNING",), "lightning_bridge", "patch_trainer"),
    "keras.src.callbacks.callback_list": (("OVERTIME_KERAS",), "keras_bridge", "patch_module"),
    "transformers.trainer_callback": (("OVERTIME_TRANSFORMERS",), "transformers_bridge", "patch_module"),
    "joblib.parallel": (("OVERTIME_JOBLIB",), "joblib_bridge", "patch_module"),
}
# What a failing bridge's one line of warning calls the bars it could not hear.
_WHAT = {"tqdm_bridge": "tqdm bars", "rich_bridge": "rich bars", "lightning_bridge": "Lightning's loops",
         "keras_bridge": "Keras' fit, evaluate and predict", "transformers_bridge": "Hugging Face's Trainer",
         "joblib_bridge": "joblib's Parallel"}


def _off(name, environ):
    return environ.get(name, "1").strip().lower() in _OFF


def wanted(environ=None):
    """The modules to bridge in this process: none outside Overtime or when turned off."""
    environ = os.environ if environ is None else environ
    if not (environ.get("OVERTIME_FD") or environ.get("OVERTIME_SOCKET")) or _off("OVERTIME_BRIDGE", environ):
        return ()
    return tuple(target for target, (variables, _, _) in _BRIDGES.items()
                 if not any(_off(variable, environ) for variable in variables))


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
    _, name, function = _BRIDGES[target]
    try:
        bridge_module = __import__("overtime_worker." + name, fromlist=[function])
        getattr(bridge_module, function)(module)
    except Exception as error:  # the program runs on, unbridged, and says so once
        sys.stderr.write("overtime_worker: {} will not report progress: {}\n".format(_WHAT[name], error))


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
