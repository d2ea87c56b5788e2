"""A wheel that carries libtq.so is tagged for this platform, not as pure Python."""

from pathlib import Path

from setuptools import Distribution, setup
from setuptools.command.bdist_wheel import bdist_wheel

LIBRARY = Path(__file__).resolve().parent / "tq" / "libtq.so"


class WithLibrary(Distribution):
    """Holds a native library when libtq.so was copied into the package, so
    the files go to platlib and the wheel is tagged for this platform."""

    def has_ext_modules(self):
        return LIBRARY.exists()


class BdistWheel(bdist_wheel):
    """bdist_wheel tagged for any Python 3: the library is loaded with ctypes,
    not linked against a Python ABI."""

    def get_tag(self):
        python, abi, platform = super().get_tag()
        if not self.root_is_pure:
            python, abi = "py3", "none"
        return python, abi, platform


setup(distclass=WithLibrary, cmdclass={"bdist_wheel": BdistWheel})
