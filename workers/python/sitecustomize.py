"""Overtime's start-up hook for ``PYTHONPATH=/path/to/workers/python`` (no pip install).

Python runs ``.pth`` files only from site-packages, so a package that is only on
PYTHONPATH needs another way in: Python imports the first ``sitecustomize`` on sys.path at
start-up, and this is it. Under Overtime it installs the tqdm and rich bridges (as the
``.pth`` line of a pip install does); outside it costs two environment lookups. Then it
runs the ``sitecustomize`` this one hides, if there is one further along sys.path (Debian's
in /usr/lib/python3.X, a virtualenv's, your own), as ``sitecustomize``, so that nothing it
did is lost. pip does not install this file: a pip install uses the ``.pth`` line instead.

The same file is Overtime's bundled bridge (``share/overtime/python`` beside the ``overtime``
command of a wheel, the tarball or the image), which the supervisor appends to each task's
PYTHONPATH. There the library sits in ``lib/`` under this file, and goes on sys.path last:
a copy of ``overtime_worker`` the job installed itself, or put on its own PYTHONPATH, is
found first and used.
"""


def _bridge():
    import os
    if os.environ.get("OVERTIME_FD") or os.environ.get("OVERTIME_SOCKET"):
        try:
            import sys
            bundled = os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib")
            if bundled not in sys.path and os.path.isfile(os.path.join(bundled, "_overtime_worker_startup.py")):
                sys.path.append(bundled)
            import _overtime_worker_startup
            _overtime_worker_startup.install()
        except Exception:
            pass


def _chain():
    """Runs the next ``sitecustomize`` on sys.path after this file's directory."""
    import importlib.machinery
    import importlib.util
    import os
    import sys
    here = os.path.dirname(os.path.abspath(__file__))
    rest = []
    seen_here = False
    for entry in sys.path:
        try:
            same = os.path.abspath(entry or os.curdir) == here
        except Exception:
            same = False
        if same:
            seen_here = True
        elif seen_here:
            rest.append(entry)
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    if spec.origin and os.path.abspath(spec.origin) == os.path.abspath(__file__):
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module   # the real one answers `import sitecustomize`
    try:
        spec.loader.exec_module(module)
    except Exception:
        # What site.py would do with an error of the sitecustomize it ran itself.
        import traceback
        sys.stderr.write("Error in sitecustomize; set PYTHONVERBOSE for traceback:\n")
        traceback.print_exc()


_bridge()
_chain()
