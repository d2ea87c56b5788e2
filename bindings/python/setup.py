"""Places libtq inside the package as tq/libtq.so, the copy tq/_native.py
loads when TQ_LIBRARY is not set, in one of two ways:

- TQ_PREBUILT_LIBRARY set: the file it names (a built libtq.so.0.3.x) is
  copied in as it is, and cargo is not run. tools/dist/python.sh builds the
  published wheel this way, from the library built for an old glibc.
- otherwise: libtq is built from source with cargo, through setuptools-rust
  (a few minutes; Rust 1.89 or newer must be installed). The crate is the
  one bundled as crate/ in the sdist (tools/dist/python.sh puts it there),
  or else the repository's own (../../Cargo.toml), so that `pip install
  ./bindings/python` works in a clone of the repository.
"""

import os
import sys
from pathlib import Path

from setuptools import Distribution, setup
from setuptools.command.bdist_wheel import bdist_wheel
from setuptools.command.build_py import build_py
from setuptools_rust import Binding, RustExtension
from setuptools_rust.build import build_rust

HERE = Path(__file__).resolve().parent
PREBUILT_ENV = "TQ_PREBUILT_LIBRARY"
#: Where the crate may be, first found wins: bundled in the sdist, then the
#: repository around bindings/python.
CRATE_MANIFESTS = (HERE / "crate" / "Cargo.toml", HERE.parent.parent / "Cargo.toml")
#: What a user building from source is told, since pip shows only a spinner.
SOURCE_BUILD_NOTICE = (
    "tq: building libtq from source with cargo (release build, about 100 crates): "
    "this takes a few minutes. To install the prebuilt wheel instead, which needs no Rust: "
    "pip install --only-binary tq tq"
)


def tell(message):
    """Writes to stderr and, when there is one, to the terminal: pip captures
    a build's output and shows it only with -v or on failure, so a person
    waiting at the terminal would otherwise see nothing for minutes."""
    print(message, file=sys.stderr, flush=True)
    if sys.stderr.isatty():
        return
    try:
        with open("/dev/tty", "w") as terminal:
            print(message, file=terminal)
    except OSError:
        pass  # no controlling terminal (CI, a service): stderr is enough


def prebuilt_library():
    """The file TQ_PREBUILT_LIBRARY names, or None when it is not set."""
    named = os.environ.get(PREBUILT_ENV)
    if not named:
        return None
    path = Path(named).resolve()
    if not path.is_file():
        raise SystemExit(f"tq: {PREBUILT_ENV}={named!r} is not a file")
    return path


def crate_manifest():
    """The Cargo.toml of the libtq crate to build from source."""
    for manifest in CRATE_MANIFESTS:
        if manifest.is_file():
            return manifest
    raise SystemExit(
        "tq: the libtq crate was not found (looked for "
        + " and ".join(str(manifest) for manifest in CRATE_MANIFESTS)
        + "): build from the sdist or from the repository's bindings/python folder, "
        f"or set {PREBUILT_ENV} to a built libtq.so"
    )


class BuildLibtq(build_rust):
    """build_rust that names the library tq/libtq.so (libtq is loaded with
    ctypes, so it takes no Python extension suffix such as
    .cpython-311-...so) and says what it is doing before the long build."""

    def run(self):
        # Without cargo, setuptools-rust's own error says so and points to wheels.
        if self.extensions:
            tell(SOURCE_BUILD_NOTICE)
        super().run()

    def get_dylib_ext_path(self, ext, target_fname):
        return str(Path(super().get_dylib_ext_path(ext, target_fname)).with_name("libtq.so"))


class BuildPyWithPrebuilt(build_py):
    """build_py that also copies the prebuilt library into the package."""

    def run(self):
        super().run()
        library = prebuilt_library()
        if library is not None:
            self.copy_file(str(library), str(Path(self.build_lib) / "tq" / "libtq.so"))


class BinaryDistribution(Distribution):
    """A distribution with a native library inside however it came, also when
    no extension is built (the prebuilt library): installed as platlib, in a
    wheel for one platform."""

    def has_ext_modules(self):
        return True


class BdistWheel(bdist_wheel):
    """bdist_wheel tagged for any Python 3 on this platform: the library is
    loaded with ctypes, not linked against a Python ABI."""

    def get_tag(self):
        _, _, platform = super().get_tag()
        return "py3", "none", platform


def rust_extensions():
    """The library to build with cargo: none when a prebuilt one is given."""
    if prebuilt_library() is not None:
        return []
    # The library as `make lib` builds it: release, default features, the
    # versions of Cargo.lock.
    return [
        RustExtension("tq.libtq", path=str(crate_manifest()), binding=Binding.NoBinding, args=["--locked"])
    ]


setup(
    distclass=BinaryDistribution,
    rust_extensions=rust_extensions(),
    cmdclass={"build_rust": BuildLibtq, "build_py": BuildPyWithPrebuilt, "bdist_wheel": BdistWheel},
)
