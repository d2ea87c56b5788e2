"""Measures the Python prototype that tq replaces, for tq's throughput benchmark.

    python3 bench/prototype.py FILE OPS PAYLOAD
        Pushes OPS copies of PAYLOAD (a JSON text) into a new queue at FILE, one
        push() each, then pull()s and finish()es them one by one.
    python3 bench/prototype.py --probe
        Describes the prototype and its SQLite, without measuring.

Prints one JSON object on stdout. The prototype is ../shared/baseline/prototype_queue.py
from the repository root, or the file named by TQ_PROTOTYPE. It is imported and used
as it is: this driver only calls it and times the calls.
"""
import importlib.util
import json
import os
import platform
import sqlite3
import sys
import time
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parent.parent


def fail(message):
    sys.exit(f"prototype driver: {message}")


def load_prototype():
    path = Path(
        os.environ.get("TQ_PROTOTYPE")
        or REPOSITORY.parent / "shared" / "baseline" / "prototype_queue.py"
    )
    if not path.is_file():
        fail(f"no prototype at {path} (set TQ_PROTOTYPE to its path)")
    # The baseline's folder is not ours to write a __pycache__ into.
    sys.dont_write_bytecode = True
    spec = importlib.util.spec_from_file_location("prototype_queue", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return path, module


def describe(path):
    # The prototype never sets synchronous, so its connections run at the level
    # any new connection of this sqlite3 module gets.
    conn = sqlite3.connect(":memory:")
    synchronous = conn.execute("PRAGMA synchronous").fetchone()[0]
    conn.close()
    return {
        "prototype": str(path),
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "synchronous": synchronous,
    }


def timed(ops, work):
    start = time.perf_counter()
    work()
    seconds = time.perf_counter() - start
    return {"ops": ops, "seconds": seconds, "ops_per_s": ops / seconds}


def measure(prototype, file, ops, payload):
    if os.path.exists(file):
        fail(f"{file} exists; give the path of a new file")
    queue = prototype.Queue(file)

    def push_all():
        for _ in range(ops):
            queue.push(payload)

    def pull_finish_all():
        for _ in range(ops):
            got = queue.pull()
            if got is None:
                fail("pull() returned None with tasks pending")
            task_id, got_payload = got
            if got_payload != payload:
                fail(f"pull() returned another payload: {got_payload!r}")
            queue.finish(task_id)

    push = timed(ops, push_all)
    if queue.size() != ops:
        fail(f"{queue.size()} tasks pending after {ops} pushes")
    pull_finish = timed(ops, pull_finish_all)

    check = sqlite3.connect(file)
    left = check.execute("SELECT count(*) FROM tasks").fetchone()[0]
    journal_mode = check.execute("PRAGMA journal_mode").fetchone()[0]
    check.close()
    if left != 0:
        fail(f"{left} tasks left after the drain")
    return {"journal_mode": journal_mode, "push": push, "pull_finish": pull_finish}


def main(args):
    if args == ["--probe"]:
        path, _ = load_prototype()
        report = describe(path)
    elif len(args) == 3:
        file, ops, payload = args
        path, prototype = load_prototype()
        report = {**describe(path), **measure(prototype, file, int(ops), json.loads(payload))}
    else:
        fail("usage: prototype.py FILE OPS PAYLOAD | prototype.py --probe")
    print(json.dumps(report))


if __name__ == "__main__":
    main(sys.argv[1:])
