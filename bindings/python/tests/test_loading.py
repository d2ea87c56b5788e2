"""Where the package finds libtq: TQ_LIBRARY, else the copy inside the
package, else the system's search path; and the errors when it cannot."""

import shutil

import pytest
from helpers import PACKAGE_DIR, child_env, loaded_library, run_python

REPORT = "import tq; print(tq.library_path); print(tq.library_version())"


def package_copy(tmp_path, with_library: bool):
    """A copy of the package under tmp_path, with libtq.so inside or not;
    returns the directory to put on PYTHONPATH."""
    root = tmp_path / "site"
    shutil.copytree(PACKAGE_DIR / "tq", root / "tq", ignore=shutil.ignore_patterns("__pycache__", "libtq.so"))
    if with_library:
        shutil.copyfile(loaded_library(), root / "tq" / "libtq.so")
    return root


def env_for(site, **changes):
    env = child_env(**changes)
    env["PYTHONPATH"] = str(site)
    return env


def test_tq_library_names_the_library(tmp_path):
    library = tmp_path / "renamed-libtq.so"
    shutil.copyfile(loaded_library(), library)
    result = run_python(REPORT, env=child_env(TQ_LIBRARY=str(library)))
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == str(library)


def test_the_copy_inside_the_package_is_used_without_tq_library(tmp_path):
    site = package_copy(tmp_path, with_library=True)
    code = REPORT + "\nwith tq.Queue(__import__('sys').argv[1]) as q: q.push(1); print(q.count())"
    result = run_python(code, tmp_path / "q.db", env=env_for(site, TQ_LIBRARY=None))
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == str(site / "tq" / "libtq.so")
    assert result.stdout.splitlines()[2] == "1"


def test_tq_library_wins_over_the_copy_inside_the_package(tmp_path):
    site = package_copy(tmp_path, with_library=True)
    library = tmp_path / "chosen.so"
    shutil.copyfile(loaded_library(), library)
    result = run_python(REPORT, env=env_for(site, TQ_LIBRARY=str(library)))
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == str(library)


def test_the_system_search_path_finds_the_library_by_its_soname(tmp_path):
    site = package_copy(tmp_path, with_library=False)
    libdir = tmp_path / "lib"
    libdir.mkdir()
    (libdir / "libtq.so.0.3").symlink_to(loaded_library())
    result = run_python(REPORT, env=env_for(site, TQ_LIBRARY=None, LD_LIBRARY_PATH=str(libdir)))
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == "libtq.so.0.3"


def test_a_tq_library_that_cannot_be_loaded_is_an_import_error_naming_all_three_places(tmp_path):
    site = package_copy(tmp_path, with_library=True)
    missing = tmp_path / "nowhere" / "libtq.so"
    result = run_python("import tq", env=env_for(site, TQ_LIBRARY=str(missing)))
    assert result.returncode == 1
    message = result.stderr.strip().splitlines()[-1]
    assert message.startswith(f"ImportError: tq: cannot load libtq from TQ_LIBRARY='{missing}': ")
    assert "No such file" in message
    # It is not replaced by the copy in the package; the other places are named.
    assert f"copy inside the package ({site / 'tq' / 'libtq.so'})" in message
    assert "system's library search path (libtq.so.0.3)" in message


# The system may have a libtq installed; the child refuses that one load as
# the dynamic loader would when none is installed.
NO_SYSTEM_LIBTQ = """
import ctypes
real = ctypes.CDLL
class NoSystemLibtq(real):
    def __init__(self, name, *args, **kwargs):
        if name == "libtq.so.0.3":
            raise OSError("libtq.so.0.3: cannot open shared object file: No such file or directory")
        super().__init__(name, *args, **kwargs)
ctypes.CDLL = NoSystemLibtq
import tq
"""


def test_no_library_anywhere_is_an_import_error_naming_all_three_places(tmp_path):
    site = package_copy(tmp_path, with_library=False)
    result = run_python(NO_SYSTEM_LIBTQ, env=env_for(site, TQ_LIBRARY=None))
    assert result.returncode == 1
    message = result.stderr.strip().splitlines()[-1]
    assert message == (
        "ImportError: tq: libtq was not found. Looked in "
        "the TQ_LIBRARY environment variable: not set; "
        f"the copy inside the package ({site / 'tq' / 'libtq.so'}): not present; "
        "the system's library search path (libtq.so.0.3): "
        "libtq.so.0.3: cannot open shared object file: No such file or directory. "
        "Build it with `make lib` and set TQ_LIBRARY to build/lib/libtq.so, "
        "install the package with `pip install ./bindings/python` in the repository, which builds "
        "libtq into it, or install libtq with `make install`."
    )


def test_a_library_that_is_not_libtq_is_refused(tmp_path):
    result = run_python("import tq", env=child_env(TQ_LIBRARY="libc.so.6"))
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        "ImportError: tq: libc.so.6 has no function tq_last_error; it is not libtq 0.3"
    )


class LibraryOfVersion:
    """Stands in for a loaded libtq of another version."""

    def __init__(self, major, minor, patch):
        self.version = (major, minor, patch)

    def tq_version_number(self):
        major, minor, patch = self.version
        return major * 10000 + minor * 100 + patch

    def tq_version(self):
        return ".".join(map(str, self.version)).encode()


def test_a_library_of_another_abi_version_is_refused():
    from tq import _native

    _native._check_version(LibraryOfVersion(0, 3, 7), "here")  # a patch release is the same ABI
    for other in [(0, 2, 0), (0, 4, 0), (1, 3, 0)]:
        with pytest.raises(ImportError) as caught:
            _native._check_version(LibraryOfVersion(*other), "/opt/libtq.so")
        version = ".".join(map(str, other))
        assert str(caught.value) == (
            f"tq: the libtq loaded from /opt/libtq.so is version {version}, "
            "but this package is written for the ABI of libtq 0.3"
        )
