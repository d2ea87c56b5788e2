"""The PostgreSQL-only options: refused on an SQLite file, and a round trip
on the server ``TQ_TEST_POSTGRES_URL`` names (``make test-postgres`` starts
one)."""

import os
import subprocess
import threading
import time

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
