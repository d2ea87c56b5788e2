"""Builds libtq from the repository with cargo, through setuptools-rust, and
places it inside the package as tq/libtq.so, the copy tq/_native.py loads
when TQ_LIBRARY is not set.

The crate is the repository's own (../../Cargo.toml), so the package builds
from the repository's bindings/python folder, as `pip install
./bindings/python` and `pip wheel ./bindings/python` do (pip builds in the
folder itself).
"""

from pathlib import Path

from setuptools import setup
from setuptools.command.bdist_wheel import bdist_wheel
from setuptools_rust import Binding, RustExtension
from setuptools_rust.build import build_rust

MANIFEST = Path(__file__).resolve().parent.parent.parent / "Cargo.toml"
if not MANIFEST.is_file():
    raise SystemExit(
        f"tq: {MANIFEST} not found: the package builds libtq from the repository it sits in, "
        "so build it from the repository's bindings/python folder"
    )


class BuildLibtq(build_rust):
    """build_rust that names the library tq/libtq.so: libtq is loaded with
    ctypes, so it takes no Python extension suffix (.cpython-311-...so)."""

    def get_dylib_ext_path(self, ext, target_fname):
        return str(Path(super().get_dylib_ext_path(ext, target_fname)).with_name("libtq.so"))


class BdistWheel(bdist_wheel):
    """bdist_wheel tagged for any Python 3 on this platform: the library is
    loaded with ctypes, not linked against a Python ABI."""

    def get_tag(self):
        _, _, platform = super().get_tag()
        return "py3", "none", platform


setup(
    rust_extensions=[
        # The library as `make lib` builds it: release, default features,
        # the versions of Cargo.lock.
        RustExtension(
            "tq.libtq",
            path=str(MANIFEST),
            binding=Binding.NoBinding,
            args=["--locked"],
        )
    ],
    cmdclass={"build_rust": BuildLibtq, "bdist_wheel": BdistWheel},
)
