"""Run at interpreter start-up by ``overtime_worker.pth``, only under Overtime.

Arranges for ``overtime_worker.tqdm_bridge.patch()`` to run right after ``tqdm.std`` is
first imported, so that tqdm bars report progress without any change to the program.
Imports nothing but ``sys``; tqdm and ``overtime_worker`` are loaded only if the program
imports tqdm. Set ``OVERTIME_TQDM=0`` to turn the bridge off.
"""

import sys

_TARGET = "tqdm.std"


class TqdmImportHook(object):
    """A meta path finder that patches tqdm once its module has executed, then leaves."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != _TARGET:
            return None
        self._leave()
        spec = None
        for finder in list(sys.meta_path):
            find_spec = getattr(finder, "find_spec", None)
            if finder is self or find_spec is None:
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
            if getattr(module, "__name__", None) == _TARGET:
                bridge(module)

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


def bridge(module):
    try:
        from overtime_worker import tqdm_bridge
        tqdm_bridge.patch(module.tqdm)
    except Exception as error:  # the program runs on, unbridged, and says so once
        sys.stderr.write("overtime_worker: tqdm bars will not report progress: {}\n".format(error))


def install():
    """Called by the .pth line when OVERTIME_FD is set."""
    try:
        if _TARGET in sys.modules:
            bridge(sys.modules[_TARGET])
        elif not any(isinstance(f, TqdmImportHook) for f in sys.meta_path):
            sys.meta_path.insert(0, TqdmImportHook())
    except Exception:
        pass
