"""`pip install` of the package folder builds libtq with cargo and puts it
inside the package: in a new virtual environment, with TQ_LIBRARY unset,
the installed package runs tasks on its own copy."""

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

from helpers import PACKAGE_DIR, REPOSITORY

ROUND_TRIP = """
import sys, tq
with tq.Queue(sys.argv[1]) as queue:
    queue.push({"n": 1})
    task = queue.pull(timeout=5)
    task.finish()
    print(tq.library_path)
    print(task.payload["n"], queue.count())
"""


def test_pip_install_of_the_folder_builds_libtq_into_the_package(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    env = {name: value for name, value in os.environ.items() if name not in ("TQ_LIBRARY", "PYTHONPATH")}
    # cargo's build of the package keeps a folder of its own under target/:
    # later runs reuse it, and make lib's build (other crate types) is left
    # as it was.
    env["CARGO_TARGET_DIR"] = str(REPOSITORY / "target" / "python-install")
    installed = subprocess.run(
        [python, "-m", "pip", "install", "--disable-pip-version-check", "--no-input", str(PACKAGE_DIR)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert installed.returncode == 0, installed.stdout + installed.stderr

    run = subprocess.run(
        [python, "-c", ROUND_TRIP, str(tmp_path / "tasks.db")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['platlib'])"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert run.stdout.splitlines() == [os.path.join(site, "tq", "libtq.so"), "1 0"]

    # A native library inside: a wheel for this platform, any Python 3.
    platform = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    (wheel,) = Path(site).glob("tq-*.dist-info/WHEEL")
    assert "Root-Is-Purelib: false" in wheel.read_text()
    assert f"Tag: py3-none-{platform}" in wheel.read_text()
