"""The PostgreSQL-only options: refused on an SQLite file, and a round trip
on the server ``TQ_TEST_POSTGRES_URL`` names (``make test-postgres`` starts
one)."""

import glob
import os
import shutil
import subprocess
import threading
import time
import urllib.parse

import pytest

import tq

POSTGRES_URL = os.environ.get("TQ_TEST_POSTGRES_URL")

# Refused before any connection, so no server is needed: nothing listens on
# port 1.
NO_SERVER = "postgres://nobody@127.0.0.1:1/none"


@pytest.mark.parametrize(
    "options, message",
    [
        ({"pool_size": 2}, "pool size applies to PostgreSQL only"),
        ({"postgres_schema": "jobs"}, "schema applies to PostgreSQL only"),
    ],
)
def test_postgres_options_are_refused_on_an_sqlite_file(path, options, message):
    with pytest.raises(tq.InvalidArgumentError, match=message):
        tq.Queue(path, **options)
    assert not path.exists()


@pytest.mark.parametrize(
    "options, error, message",
    [
        ({"pool_size": 0}, tq.InvalidArgumentError, "pool size"),
        ({"pool_size": tq.MAX_POOL_SIZE + 1}, tq.InvalidArgumentError, "pool size"),
        ({"pool_size": -1}, tq.InvalidArgumentError, "pool_size must be between"),
        ({"pool_size": "2"}, TypeError, "pool_size must be an integer"),
        ({"postgres_schema": "pg_jobs"}, tq.InvalidArgumentError, "not a schema name"),
        ({"postgres_schema": "a\0b"}, tq.InvalidArgumentError, "contains a NUL character"),
        ({"postgres_schema": 7}, TypeError, "postgres_schema must be a str"),
    ],
)
def test_bad_postgres_option_values_are_refused(options, error, message):
    with pytest.raises(error, match=message):
        tq.Queue(NO_SERVER, **options)


@pytest.mark.skipif(
    POSTGRES_URL is None, reason="TQ_TEST_POSTGRES_URL is not set (`make test-postgres` starts a server)"
)
def test_postgres_push_pull_finish():
    schema = f"py_test_{os.getpid()}_{time.time_ns()}"
    mine = tq.Queue(POSTGRES_URL, postgres_schema=schema, pool_size=1)
    other = tq.Queue(POSTGRES_URL, postgres_schema=schema + "_other")
    with mine as queue, other:
        first = queue.push({"n": 1})
        # Another schema of the same database holds other queues.
        assert other.counts()["pending"] == 0
        assert queue.counts() == {"pending": 1, "leased": 0, "done": 0, "dead": 0, "cancelled": 0}
        task = queue.pull()
        assert (task.id, task.payload) == (first, {"n": 1})
        task.finish()
        assert queue.pull() is None
        assert queue.counts() == {"pending": 0, "leased": 0, "done": 0, "dead": 0, "cancelled": 0}


@pytest.mark.skipif(
    POSTGRES_URL is None, reason="TQ_TEST_POSTGRES_URL is not set (`make test-postgres` starts a server)"
)
def test_postgres_result_progress_and_wait():
    schema = f"py_test_{os.getpid()}_{time.time_ns()}"
    with tq.Queue(POSTGRES_URL, postgres_schema=schema, result_retention=3600) as queue:
        task_id = queue.push({"n": 1})
        task = queue.pull()
        task.extend(60, progress={"step": 1})
        assert queue.task(task_id).progress == {"step": 1}
        threading.Timer(0.2, lambda: task.finish(result={"ok": True})).start()
        snapshot = queue.wait(task_id, timeout=10)
        assert (snapshot.state, snapshot.result) == (tq.State.DONE, {"ok": True})


@pytest.mark.skipif(
    POSTGRES_URL is None, reason="TQ_TEST_POSTGRES_URL is not set (`make test-postgres` starts a server)"
)
def test_postgres_schedule_slots_are_pulled_once_by_two_handles():
    schema = f"py_test_{os.getpid()}_{time.time_ns()}"
    first = tq.Queue(POSTGRES_URL, postgres_schema=schema)
    second = tq.Queue(POSTGRES_URL, postgres_schema=schema)
    with first, second:
        first.add_schedule("tick", {"tick": 1}, every=0.2, catch_up="each", catch_up_limit=100)
        assert [schedule.name for schedule in second.schedules()] == ["tick"]
        slots = []
        started = time.monotonic()
        while time.monotonic() - started < 1.1:
            for queue in (first, second):
                task = queue.pull(timeout=0.1)
                if task is not None:
                    slots.append(task.run_at.timestamp())
                    task.finish()
        first.remove_schedule("tick")
        assert len(slots) >= 4
        assert len(set(slots)) == len(slots)
        slots.sort()
        assert {round(b - a, 3) for a, b in zip(slots, slots[1:])} == {0.2}


@pytest.mark.skipif(
    POSTGRES_URL is None or "TQ_TEST_POSTGRES_DIR" not in os.environ,
    reason="TQ_TEST_POSTGRES_URL or TQ_TEST_POSTGRES_DIR is not set (`make test-postgres` starts a server and sets both)",
)
def test_a_watch_outlives_a_server_restart_and_still_hears_the_cancellation():
    schema = f"py_test_{os.getpid()}_{time.time_ns()}"
    holder = tq.Queue(POSTGRES_URL, postgres_schema=schema)
    other = tq.Queue(POSTGRES_URL, postgres_schema=schema)
    with holder, other:
        task_id = holder.push({"long": True})
        task = holder.pull()
        with task.watch_cancellation() as watch:
            root = os.path.join(os.path.dirname(__file__), "..", "..", "..")
            subprocess.run(
                [os.path.join(root, "tests", "postgres", "cluster.sh"), "restart", os.environ["TQ_TEST_POSTGRES_DIR"], "immediate"],
                check=True,
                capture_output=True,
            )
            time.sleep(1.5)  # past the watch's read of the task once a second
            assert watch.running and not watch.cancelled.is_set()
            other.cancel_task(task_id, "stop")
            assert watch.cancelled.wait(20)


ROOT = os.path.join(os.path.dirname(__file__), "..", "..", "..")
ORDER_AND_RECEIPT = os.path.join(ROOT, "examples", "postgresql", "order_and_receipt.sql")


def _psql():
    """The psql of the server tests/postgres/cluster.sh runs (PG_BIN, else
    the newest installed), else the one on PATH."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/psql"), key=lambda p: int(p.split("/")[4]))
    candidates = [os.path.join(os.environ.get("PG_BIN", ""), "psql")] + found[::-1] + [shutil.which("psql")]
    return next(path for path in candidates if path and os.access(path, os.X_OK))


def _run_psql(url, *args):
    return subprocess.run(
        [_psql(), "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-d", url, *args],
        check=True,
        capture_output=True,
        text=True,
    ).stdout


@pytest.mark.skipif(
    POSTGRES_URL is None, reason="TQ_TEST_POSTGRES_URL is not set (`make test-postgres` starts a server)"
)
def test_postgres_psql_pushes_with_its_order_and_a_python_worker_sees_only_the_committed_task():
    # A database of its own, so that the example runs as documented, on
    # the default schema.
    database = f"py_order_and_receipt_{os.getpid()}_{time.time_ns()}"
    _run_psql(POSTGRES_URL, "-c", f'CREATE DATABASE "{database}"')
    url = urllib.parse.urlunsplit(urllib.parse.urlsplit(POSTGRES_URL)._replace(path="/" + database))
    try:
        with tq.Queue(url, queue="emails") as queue:
            woken = []
            waiting = threading.Thread(target=lambda: woken.append(queue.pull(timeout=60)))
            waiting.start()
            _run_psql(url, "-f", ORDER_AND_RECEIPT)
            waiting.join()
            task = woken[0]
            assert task is not None, "the commit wakes the waiting worker"
            assert task.payload == {"receipt_for": 1}
            task.finish()
            assert queue.pull() is None, "the rolled-back order has no task"
        assert _run_psql(url, "-c", "SELECT id FROM orders").split() == ["1"]
    finally:
        _run_psql(POSTGRES_URL, "-c", f'DROP DATABASE "{database}" WITH (FORCE)')


def test_the_guide_shows_the_order_and_receipt_example_as_it_runs():
    with open(ORDER_AND_RECEIPT, encoding="utf-8") as example:
        text = example.read()
    with open(os.path.join(ROOT, "docs", "postgresql.md"), encoding="utf-8") as guide:
        assert text in guide.read()
