"""Builds the wheel with ``overtime_worker.pth`` at its root, so that pip installs it into
site-packages itself, where Python runs it at start-up (the tqdm bridge), and
``overtime_worker/_version.py`` inside it. The version is the checkout's ``VERSION`` file,
Overtime's one version; an sdist carries a copy of it, which a build from the sdist reads.
Everything else is declared in pyproject.toml."""

import os

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

HERE = os.path.dirname(os.path.abspath(__file__))


def read_version():
    for candidate in (os.path.join(HERE, "..", "..", "VERSION"), os.path.join(HERE, "VERSION")):
        if os.path.isfile(candidate):
            with open(candidate) as f:
                return f.read().strip()
    raise SystemExit("overtime-worker: no VERSION file (expected at the top of the Overtime checkout)")


VERSION = read_version()


class BuildWithStartupHook(build_py):
    def run(self):
        super().run()
        self.copy_file(os.path.join(HERE, "overtime_worker.pth"),
                       os.path.join(self.build_lib, "overtime_worker.pth"), preserve_mode=False)
        with open(os.path.join(self.build_lib, "overtime_worker", "_version.py"), "w") as f:
            f.write("version = {!r}\n".format(VERSION))

    def get_outputs(self, include_bytecode=True):
        return super().get_outputs(include_bytecode) + [
            os.path.join(self.build_lib, "overtime_worker.pth"),
            os.path.join(self.build_lib, "overtime_worker", "_version.py"),
        ]


class SdistWithVersion(sdist):
    def make_release_tree(self, base_dir, files):
        super().make_release_tree(base_dir, files)
        with open(os.path.join(base_dir, "VERSION"), "w") as f:
            f.write(VERSION + "\n")


setup(version=VERSION, cmdclass={"build_py": BuildWithStartupHook, "sdist": SdistWithVersion})
