"""Queue.work: handlers on threads fed by batch claims, finishes in batches,
lease renewal, cancellation, stopping, and riding out a server restart."""

import os
import subprocess
import threading
import time

import pytest
from helpers import hold_write_lock

import tq

POSTGRES_URL = os.environ.get("TQ_TEST_POSTGRES_URL")
POSTGRES_DIR = os.environ.get("TQ_TEST_POSTGRES_DIR")
REPOSITORY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..")
CLUSTER = os.path.join(REPOSITORY, "tests", "postgres", "cluster.sh")


def start_work(queue, handler, **options):
    """Runs queue.work on a thread; returns the thread, the stop event and a
    dict that gets the outcome ("stats" or "error")."""
    stop = threading.Event()
    outcome = {}

    def run():
        try:
            outcome["stats"] = queue.work(handler, stop=stop, **options)
        except BaseException as error:  # noqa: BLE001 (the test looks at it)
            outcome["error"] = error

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, stop, outcome


def wait_for(condition, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("timed out")
        time.sleep(0.005)


def test_every_task_is_handled_once_by_at_most_concurrency_handlers(queue):
    ids = queue.push_many({"n": n} for n in range(300))
    lock = threading.Lock()
    handled = []
    running = [0, 0]  # now, most at once

    def handle(task):
        with lock:
            running[0] += 1
            running[1] = max(running)
        time.sleep(0.002)
        with lock:
            running[0] -= 1
            handled.append(task.id)

    thread, stop, outcome = start_work(queue, handle, concurrency=8)
    wait_for(lambda: len(handled) >= 300, timeout=60)
    stop.set()
    thread.join(10)
    assert not thread.is_alive()
    assert sorted(handled) == sorted(ids)
    assert 2 <= running[1] <= 8
    assert outcome["stats"] == tq.WorkStats(finished=300, failed=0, lost=0)
    assert queue.counts() == {"pending": 0, "leased": 0, "done": 0, "dead": 0, "cancelled": 0}


def test_claims_take_a_batch_for_the_free_handlers_and_never_more(path, monkeypatch):
    """Handlers that wait: each of the 4 gets a task of the first claims,
    and nothing is claimed ahead of them. Then handlers that return at
    once: the tasks held (by another handle's count) never exceed the
    concurrency, and each commit claims several tasks."""
    concurrency = 4
    with tq.Queue(path) as queue, tq.Queue(path) as observer:
        queue.push_many({"n": n} for n in range(200))
        lock = threading.Lock()
        claims = []
        finish_and_claim = queue._finish_and_claim
        pull_many = queue.pull_many

        def recording_finish_and_claim(caller, tasks, n, options):
            finished, claimed = finish_and_claim(caller, tasks, n, options)
            with lock:
                claims.append(len(claimed))
            return finished, claimed

        def recording_pull_many(n, *args, **kwargs):
            claimed = pull_many(n, *args, **kwargs)
            with lock:
                claims.append(len(claimed))
            return claimed

        monkeypatch.setattr(queue, "_finish_and_claim", recording_finish_and_claim)
        monkeypatch.setattr(queue, "pull_many", recording_pull_many)
        release = threading.Event()
        running = [0]
        handled = []

        def handle(task):
            with lock:
                running[0] += 1
            if not release.is_set():
                release.wait(10)
            with lock:
                running[0] -= 1
                handled.append(task.id)

        thread, stop, outcome = start_work(queue, handle, concurrency=concurrency)
        wait_for(lambda: running[0] == concurrency)
        time.sleep(0.1)
        # Nothing claimed ahead of the handlers.
        assert observer.count("leased") == concurrency
        most_held = 0
        release.set()
        while len(handled) < 200:
            most_held = max(most_held, observer.count("leased"))
        stop.set()
        thread.join(10)
        assert outcome["stats"] == tq.WorkStats(finished=200, failed=0, lost=0)
        assert 1 <= most_held <= concurrency
        # The tasks were claimed several at a time, not one claim each.
        assert sum(claims) == 200
        assert len([n for n in claims if n]) < 200 / 2


def test_handlers_that_turn_long_get_a_thread_each(queue):
    """Short handlers run in turn on the thread at hand; once they take
    long (here, waiting on each other), the tasks claimed get threads of
    their own rather than waiting for that thread."""
    queue.push_many({"long": False} for _ in range(100))
    lock = threading.Lock()
    short_done = []

    def handle(task):
        if task.payload["long"]:
            # Returns only once 4 long handlers run at once.
            together.wait(10)
        else:
            with lock:
                short_done.append(task.id)

    together = threading.Barrier(4)
    thread, stop, outcome = start_work(queue, handle, concurrency=4)
    wait_for(lambda: len(short_done) == 100)
    queue.push_many({"long": True} for _ in range(4))
    wait_for(lambda: queue.counts()["pending"] == 0 and queue.count("leased") == 0)
    stop.set()
    thread.join(10)
    assert not together.broken
    assert outcome["stats"] == tq.WorkStats(finished=104, failed=0, lost=0)


def test_a_raising_handler_fails_its_task_with_the_reason(queue):
    task_id = queue.push({"n": 1}, max_attempts=1)

    def handle(task):
        raise ValueError("bad\0thing")

    thread, stop, outcome = start_work(queue, handle)
    wait_for(lambda: queue.count("dead") == 1)
    stop.set()
    thread.join(10)
    (dead,) = queue.list("dead")
    assert dead.id == task_id
    assert dead.last_error == "ValueError: bad\\x00thing"
    assert outcome["stats"] == tq.WorkStats(finished=0, failed=1, lost=0)


def test_a_finish_and_a_fail_refused_while_the_file_is_busy_are_tried_again(path):
    """Another process holds the file's write lock from before the handlers
    return until 0.4 s later: the finish and the fail are refused
    (BusyError, past a 50 ms busy timeout) and tried again until it is
    released, well within one lease."""
    with tq.Queue(path, busy_timeout=0.05) as queue:
        finished_id = queue.push({"ok": True})
        failed_id = queue.push({"ok": False}, max_attempts=1)
        both_running = threading.Barrier(2)
        holders = []
        reported = []

        def handle(task):
            # Both tasks were claimed in one batch before the lock is taken.
            if both_running.wait(10) == 0:
                holder = hold_write_lock(path)
                holders.append(holder)
                threading.Timer(0.4, lambda: holder.communicate("release\n", timeout=10)).start()
            else:
                time.sleep(0.05)
            if not task.payload["ok"]:
                raise ValueError("refused on purpose")

        thread, stop, outcome = start_work(
            queue,
            handle,
            concurrency=2,
            lease=30,
            on_error=lambda task, error: reported.append(error),
        )
        wait_for(lambda: len(holders) == 1 and holders[0].poll() is not None)
        wait_for(lambda: queue.count("dead") == 1 and queue.count("pending") == 0)
        stop.set()
        thread.join(10)
        assert holders[0].returncode == 0
        assert outcome["stats"] == tq.WorkStats(finished=1, failed=1, lost=0)
        assert any(isinstance(error, tq.BusyError) for error in reported), reported
        (dead,) = queue.list("dead")
        assert dead.id == failed_id
        assert dead.last_error == "ValueError: refused on purpose"
        assert queue.task(finished_id) is None


def test_lease_renewal_keeps_a_long_task_from_other_pullers(path):
    with tq.Queue(path) as queue, tq.Queue(path) as other:
        queue.push({"long": True})
        started = threading.Event()
        done = threading.Event()

        def handle(task):
            started.set()
            time.sleep(0.75)
            done.set()

        thread, stop, outcome = start_work(queue, handle, lease=0.15)
        assert started.wait(10)
        taken = []
        while not done.is_set():
            task = other.pull(lease=30)
            if task is not None:
                taken.append(task.id)
                task.close()
            time.sleep(0.02)
        stop.set()
        thread.join(10)
        assert taken == []
        assert outcome["stats"] == tq.WorkStats(finished=1, failed=0, lost=0)
        assert queue.counts()["pending"] == 0


def test_a_task_cancelled_while_its_handler_runs_is_signalled_to_it(path):
    with tq.Queue(path, keep_history=True) as queue:
        task_id = queue.push({"n": 1})
        started = threading.Event()
        heard = []

        def handle(task, lost):
            started.set()
            heard.append(lost.wait(10))

        thread, stop, outcome = start_work(queue, handle, lease=0.3)
        assert started.wait(10)
        assert queue.cancel_task(task_id, "no longer wanted") == tq.State.LEASED
        wait_for(lambda: heard)
        stop.set()
        thread.join(10)
        assert heard == [True]
        assert queue.task(task_id).state == tq.State.CANCELLED
        assert outcome["stats"] == tq.WorkStats(finished=0, failed=0, lost=1)


def test_stop_lets_the_running_handler_finish_and_claims_nothing_more(queue):
    queue.push({"n": 1})
    started = threading.Event()
    release = threading.Event()
    ended = []

    def handle(task):
        started.set()
        release.wait(10)
        ended.append(time.monotonic())

    thread, stop, outcome = start_work(queue, handle, concurrency=2)
    assert started.wait(10)
    stop.set()
    time.sleep(0.1)
    later = queue.push({"n": 2})
    time.sleep(0.1)
    assert thread.is_alive()  # waits for its handler
    release.set()
    thread.join(10)
    assert not thread.is_alive()
    assert len(ended) == 1
    assert outcome["stats"] == tq.WorkStats(finished=1, failed=0, lost=0)
    assert [task.id for task in queue.list("pending")] == [later]
    assert queue.count("leased") == 0


def test_closing_the_queue_ends_work_with_closed_error(queue):
    thread, stop, outcome = start_work(queue, lambda task: None)
    time.sleep(0.2)
    assert thread.is_alive()
    queue.close()
    thread.join(10)
    assert not thread.is_alive()
    assert isinstance(outcome.get("error"), tq.ClosedError)


@pytest.mark.parametrize(
    "arguments, error",
    [
        ({"concurrency": 0}, tq.InvalidArgumentError),
        ({"concurrency": -3}, tq.InvalidArgumentError),
        ({"concurrency": "4"}, TypeError),
        ({"lease": 0.001}, tq.InvalidArgumentError),
        ({"lease": -1}, tq.InvalidArgumentError),
        ({"lease": float("inf")}, tq.InvalidArgumentError),
        ({"lease": "30"}, TypeError),
        ({"handler": None}, TypeError),
        ({"handler": "print"}, TypeError),
        ({"stop": object()}, TypeError),
        ({"on_error": 1}, TypeError),
    ],
)
def test_bad_arguments_are_refused_and_change_nothing(queue, arguments, error):
    queue.push({"n": 1})
    handler = arguments.pop("handler", lambda task: None)
    with pytest.raises(error):
        queue.work(handler, stop=threading.Event(), **arguments)
    assert queue.counts()["pending"] == 1


@pytest.mark.skipif(
    POSTGRES_URL is None or POSTGRES_DIR is None,
    reason="TQ_TEST_POSTGRES_URL or TQ_TEST_POSTGRES_DIR is not set "
    "(`make test-postgres` starts a server and sets both)",
)
def test_postgres_work_goes_on_across_a_server_restart():
    schema = f"py_work_{os.getpid()}_{time.time_ns()}"
    with tq.Queue(POSTGRES_URL, postgres_schema=schema, busy_timeout=1) as queue:
        handled = set()
        reported = []

        def handle(task):
            handled.add(task.payload["n"])

        thread, stop, outcome = start_work(
            queue, handle, concurrency=4, on_error=lambda task, error: reported.append(error)
        )
        for n in range(5):
            queue.push({"n": n})
        wait_for(lambda: len(handled) == 5, timeout=30)
        subprocess.run(
            [CLUSTER, "restart", POSTGRES_DIR, "immediate"],
            check=True,
            capture_output=True,
        )
        for n in range(5, 10):
            deadline = time.monotonic() + 60
            while True:
                try:
                    queue.push({"n": n}, unique_key=f"n{n}")
                    break
                except (tq.BusyError, tq.IoError, tq.UnknownOutcomeError):
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.1)
        wait_for(lambda: len(handled) == 10, timeout=60)
        assert thread.is_alive() and not outcome
        stop.set()
        thread.join(30)
        assert not thread.is_alive()
        assert "error" not in outcome
        assert handled == set(range(10))
        # What the restart refused was reported and tried again.
        transient = (tq.BusyError, tq.IoError, tq.UnknownOutcomeError)
        assert all(isinstance(error, transient) for error in reported)
