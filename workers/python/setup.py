"""Builds the wheel with ``overtime_worker.pth`` at its root, so that pip installs it into
site-packages itself, where Python runs it at start-up (the tqdm bridge). Everything
else is declared in pyproject.toml."""

import os

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))


class BuildWithStartupHook(build_py):
    def run(self):
        super().run()
        self.copy_file(os.path.join(HERE, "overtime_worker.pth"),
                       os.path.join(self.build_lib, "overtime_worker.pth"), preserve_mode=False)

    def get_outputs(self, include_bytecode=True):
        return super().get_outputs(include_bytecode) + [os.path.join(self.build_lib, "overtime_worker.pth")]


setup(cmdclass={"build_py": BuildWithStartupHook})
