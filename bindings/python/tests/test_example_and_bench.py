"""The prototype's scenario (examples/python/blog_example.py) and a smoke run
of the benchmark against the prototype (bench/python_bench.py)."""

import os
import re
import subprocess
import sys

from helpers import REPOSITORY, child_env

import tq


def test_the_blog_example_finishes_all_100_tasks_with_4_threads(tmp_path):
    path = tmp_path / "tasks.db"
    result = subprocess.run(
        [sys.executable, str(REPOSITORY / "examples" / "python" / "blog_example.py"), str(path)],
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    left, per_thread = result.stdout.splitlines()
    assert left == "pending left: 0"
    counts = [int(n) for n in per_thread.removeprefix("finished per thread: [").rstrip("]").split(",")]
    assert len(counts) == 4 and sum(counts) == 100
    with tq.Queue(path) as queue:
        assert queue.counts() == {"pending": 0, "leased": 0, "done": 0, "dead": 0, "cancelled": 0}


def test_the_benchmark_runs_in_quick_mode(tmp_path):
    result = subprocess.run(
        [sys.executable, str(REPOSITORY / "bench" / "python_bench.py")],
        env=child_env(TQ_BENCH_QUICK="1", TQ_BENCH_DIR=str(tmp_path)),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    # The prototype lives outside the repository; without it, its cells are skipped.
    [prototype] = [line for line in lines if line.startswith("prototype:")]
    has_prototype = not prototype.startswith("prototype:  none at ")
    for durability in ("full", "normal"):
        header = lines.index(next(line for line in lines if line.startswith(f"{durability}, ops/s")))
        # scenario, prototype, tq, ctypes, tq/prototype, tq/ctypes
        rows = [re.split(r"\s{2,}", line.strip()) for line in lines[header + 1 : header + 8]]
        assert [row[0] for row in rows] == [
            "push",
            "pull+finish",
            "worker loop",
            "worker loop, 4 threads",
            "2 producers + 2 consumers",
            "batch push (100 per call)",
            "batch pull+finish (100 per call)",
        ]
        # tq never fails a run; the prototype may, under contention.
        assert all(len(row) == 6 and re.fullmatch(r"\d+ \[\d+-\d+\]", row[2]) for row in rows), rows
        # The prototype has no batches; ctypes runs the one-thread scenarios.
        assert [row[1] == "-" for row in rows] == [not has_prototype] * 5 + [True] * 2
        assert [row[3] == "-" for row in rows] == [False, False, False, True, True, False, False]
        # A prototype's run that failed (its file locked past its timeout) leaves "-".
        ratio = r"\d+\.\d\dx|-" if has_prototype else "-"
        assert all(re.fullmatch(ratio, row[4]) for row in rows), rows
    assert os.listdir(tmp_path) == []  # its files removed
