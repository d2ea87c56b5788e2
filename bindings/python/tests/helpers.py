"""What several test modules share: running Python in a child process with
the package under test, and functions that spawned processes run."""

import os
import subprocess
import sys
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent.parent
REPOSITORY = PACKAGE_DIR.parent.parent


def loaded_library() -> str:
    """The file of the libtq this process has loaded (found in its memory
    map, whichever way it was found)."""
    import tq  # noqa: F401  (loads the library)

    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split()
            if len(fields) >= 6 and os.path.basename(fields[5]).startswith("libtq.so"):
                return fields[5]
    raise AssertionError("libtq is not mapped in this process")


def child_env(**changes) -> dict:
    """The environment for a child Python that imports this source tree's
    package; a value of None removes the variable."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PACKAGE_DIR), env.get("PYTHONPATH")]))
    for name, value in changes.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


def run_python(code: str, *args, env=None, timeout=60) -> subprocess.CompletedProcess:
    """Runs ``code`` in a new Python with ``args`` in sys.argv[1:], from the
    root directory so that no package in the current directory is imported."""
    return subprocess.run(
        [sys.executable, "-c", code, *map(str, args)],
        cwd="/",
        env=env if env is not None else child_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def consume_until_stopped(path, results):
    """Run by spawned processes: puts "ready" on ``results`` once its queue is
    open, works through tasks with finish_and_pull until it gets a
    {"stop": true} task, which it finishes alone, then puts the (id, n) of
    each task it finished on ``results``."""
    import tq

    done = []
    with tq.Queue(path) as queue:
        results.put(("ready", None))
        task = queue.pull(timeout=30)
        while task is not None:
            if task.payload.get("stop"):
                task.finish()
                results.put(("ok", done))
                return
            done.append((task.id, task.payload["n"]))
            task = task.finish_and_pull(timeout=30)
        results.put(("timeout", done))


# Holds the write lock of the file named in argv[1] from "locked" until a
# line comes in. In a process of its own: POSIX locks taken by two copies of
# SQLite in one process do not exclude each other.
HOLD_WRITE_LOCK = """
import sqlite3, sys
connection = sqlite3.connect(sys.argv[1], isolation_level=None)
connection.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
sys.stdin.readline()
connection.execute("ROLLBACK")
"""


def hold_write_lock(path) -> subprocess.Popen:
    """Starts a process that holds the write lock of the queue file at
    ``path`` until a line is written to its stdin (or its stdin closes);
    returns once it holds it."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_WRITE_LOCK, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    if holder.stdout.readline() != "locked\n":
        holder.kill()
        holder.wait()
        raise AssertionError("the process did not take the write lock")
    return holder
