"""setup.py with TQ_PREBUILT_LIBRARY: the wheel carries that library as
tq/libtq.so, byte for byte, without cargo and without the crate, as
tools/dist/python.sh builds the published wheel."""

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

from helpers import PACKAGE_DIR, loaded_library


def package_copy(tmp_path) -> Path:
    """The package folder alone, away from the repository and its crate."""
    copy = tmp_path / "package"
    shutil.copytree(PACKAGE_DIR, copy, ignore=shutil.ignore_patterns("tests", "build", "*.egg-info", "*.so"))
    return copy


def build_wheel(package, out, **env_changes) -> subprocess.CompletedProcess:
    env = {name: value for name, value in os.environ.items() if name != "TQ_PREBUILT_LIBRARY"}
    # No Rust on PATH: nothing here may need cargo.
    env["PATH"] = os.pathsep.join(
        folder
        for folder in env["PATH"].split(os.pathsep)
        if not (Path(folder, "cargo").exists() or Path(folder, "rustc").exists())
    )
    env.update(env_changes)
    return subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--disable-pip-version-check", "--no-input",
         "--wheel-dir", str(out), str(package)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_a_prebuilt_library_goes_into_the_wheel_as_it_is(tmp_path):
    library = Path(loaded_library())
    built = build_wheel(package_copy(tmp_path), tmp_path / "out", TQ_PREBUILT_LIBRARY=str(library))
    assert built.returncode == 0, built.stdout + built.stderr

    platform = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    (wheel,) = (tmp_path / "out").glob("tq-*.whl")
    assert wheel.name.endswith(f"-py3-none-{platform}.whl")
    with zipfile.ZipFile(wheel) as archive:
        # At the root (platlib), where auditwheel looks for libraries.
        assert archive.read("tq/libtq.so") == library.read_bytes()
        (wheel_info,) = [name for name in archive.namelist() if name.endswith(".dist-info/WHEEL")]
        assert "Root-Is-Purelib: false" in archive.read(wheel_info).decode()


def test_a_prebuilt_library_that_is_not_there_is_named_in_the_error(tmp_path):
    missing = tmp_path / "libtq.so.0.3.0"
    built = build_wheel(package_copy(tmp_path), tmp_path / "out", TQ_PREBUILT_LIBRARY=str(missing))
    assert built.returncode != 0
    assert f"TQ_PREBUILT_LIBRARY={str(missing)!r} is not a file" in built.stdout + built.stderr


def test_without_a_prebuilt_library_or_the_crate_the_error_says_where_it_looked(tmp_path):
    package = package_copy(tmp_path)
    built = build_wheel(package, tmp_path / "out")
    assert built.returncode != 0
    output = built.stdout + built.stderr
    assert "the libtq crate was not found" in output
    assert str(package / "crate" / "Cargo.toml") in output
