"""The job features: failures, retries and dead tasks, priorities, named
queues, unique keys, heartbeats, finish-and-pull, the task's fields, and the
calls that look at and look after the backlog."""

import datetime
import subprocess
import sys
import threading
import time

import pytest
from helpers import child_env

import tq


def fast_retries(path, **options):
    """A queue whose failed tasks are ready again at once."""
    return tq.Queue(path, retry_backoff=(0, 0), **options)


# --- Failures, retries and dead tasks ------------------------------------------


def test_a_failed_task_comes_back_with_its_reason_then_dies_after_max_attempts(path):
    with fast_retries(path, max_attempts=3) as queue:
        pushed = queue.push({"job": "flaky"})
        for attempt in (1, 2, 3):
            task = queue.pull()
            assert (task.id, task.attempts, task.max_attempts) == (pushed, attempt, 3)
            assert task.last_error == (None if attempt == 1 else f"try {attempt - 1} failed")
            task.fail(f"try {attempt} failed")
            assert task.closed
        assert queue.pull() is None
        assert queue.counts() == {"pending": 0, "leased": 0, "done": 0, "dead": 1, "cancelled": 0}
        [dead] = queue.list("dead")
        assert isinstance(dead, tq.TaskSnapshot)
        assert (dead.id, dead.state, dead.attempts, dead.last_error) == (
            pushed,
            tq.State.DEAD,
            3,
            "try 3 failed",
        )
        assert dead.payload == {"job": "flaky"}


def test_a_failed_task_waits_out_its_back_off(path):
    with tq.Queue(path, retry_backoff=(0.4, 0.4)) as queue:
        queue.push(1)
        queue.pull().fail("later")
        assert queue.pull() is None  # back-off: 0.2 to 0.4 s with jitter
        task = queue.pull(timeout=5)
        assert task is not None and task.attempts == 2 and task.last_error == "later"
        task.finish()


def test_max_attempts_per_push_overrides_the_queues(path):
    with fast_retries(path, max_attempts=10) as queue:
        queue.push(1, max_attempts=1)
        task = queue.pull()
        assert task.max_attempts == 1
        task.fail()
        assert queue.count("dead") == 1
        [dead] = queue.list(tq.State.DEAD)
        assert dead.last_error is None  # no reason given


def test_fail_keeps_any_text_and_formats_exceptions(path):
    with fast_retries(path) as queue:
        queue.push(1)
        queue.pull().fail(ValueError("bad input"))
        task = queue.pull()
        assert task.last_error == "ValueError: bad input"
        task.fail("nul \0 and lone \udc80 surrogate, ünïcödé")
        task = queue.pull()
        assert task.last_error == "nul \\x00 and lone \\udc80 surrogate, ünïcödé"
        task.fail("x" * (tq.MAX_REASON_LEN + 10))
        task = queue.pull()
        assert task.last_error == "x" * tq.MAX_REASON_LEN  # cut to the limit
        with pytest.raises(TypeError, match="reason must be a str or an exception"):
            task.fail(42)
        assert not task.closed
        task.finish()


def test_dead_tasks_are_retried_one_or_all_and_purged(path):
    with fast_retries(path, max_attempts=1) as queue:
        ids = [queue.push({"n": n}) for n in range(4)]
        for _ in ids:
            queue.pull().fail("no")
        assert queue.count("dead") == 4
        queue.retry_dead(ids[0])
        task = queue.pull()
        assert (task.id, task.attempts) == (ids[0], 1)  # all its attempts ahead again
        task.finish()
        with pytest.raises(tq.InvalidArgumentError, match=f"has no dead task {ids[0]}"):
            queue.retry_dead(ids[0])
        queue.retry_dead(ids[1])
        assert queue.purge(older_than=3600, state="dead") == 0  # dead for less than an hour
        assert queue.purge(state=tq.State.DEAD) == 2
        assert queue.count("dead") == 0
        assert queue.retry_all_dead() == 0
        assert [task.id for task in queue.list()] == [ids[1]]


def test_retry_all_dead_counts_what_it_retried(path):
    with fast_retries(path, max_attempts=1) as queue:
        for n in range(3):
            queue.push(n)
            queue.pull().fail()
        assert queue.retry_all_dead() == 3
        assert queue.counts() == {"pending": 3, "leased": 0, "done": 0, "dead": 0, "cancelled": 0}


# --- Priorities and named queues -------------------------------------------------


def test_higher_priority_first_then_push_order(queue):
    low = queue.push("1", priority=-5)
    normal = [queue.push(str(n)) for n in range(3)]
    high = queue.push("9", priority=10)
    order = []
    while (task := queue.pull()) is not None:
        order.append((task.id, task.priority))
        task.finish()
    assert order == [(high, 10)] + [(n, 0) for n in normal] + [(low, -5)]


def test_named_queues_in_one_file_are_independent(path):
    with tq.Queue(path, queue="emails") as emails, tq.Queue(path, queue="reports") as reports:
        assert (emails.name, reports.name) == ("emails", "reports")
        email = emails.push({"to": "a@example.com"})
        reports.push({"report": 1})
        reports.push({"report": 2})
        assert emails.count() == 1 and reports.count() == 2
        task = emails.pull()
        assert task.id == email
        # A task may be finished through any handle on the file.
        reports.finish_many([task])
        assert emails.counts() == {"pending": 0, "leased": 0, "done": 0, "dead": 0, "cancelled": 0}
        assert reports.count() == 2
    with tq.Queue(path) as default:
        assert default.name == "default" and default.count() == 0


# --- Unique tasks -----------------------------------------------------------------


def test_a_unique_key_held_by_a_live_task_stores_nothing(queue):
    first = queue.push_unique({"invoice": 1042}, "invoice:1042")
    assert first == tq.Pushed(first.id, True) and first.created
    again = queue.push_unique({"invoice": "other payload"}, "invoice:1042")
    assert again == (first.id, False) and not again.merged
    assert queue.push({"invoice": 1042}, unique_key="invoice:1042") == first.id  # plain push: the id
    assert queue.count() == 1
    task = queue.pull()  # leased still holds the key
    assert queue.push_unique(1, "invoice:1042") == (first.id, False)
    task.finish()
    # Done: the key is free again.
    fresh = queue.push_unique(1, "invoice:1042")
    assert fresh.created and fresh.id != first.id


def test_a_pending_holder_takes_a_replacing_or_debouncing_push(queue):
    first = queue.push(1, unique_key="doc:7")
    merged = queue.push_unique(2, "doc:7", replace_pending=True, delay=3600, debounce=7200)
    assert merged == (first, False) and merged.merged
    assert queue.push(3, unique_key="doc:7", replace_pending=True) == first
    assert queue.count() == 1
    assert queue.pull() is None  # debounced an hour away
    # A debounce to now makes it ready, with the newest payload.
    assert queue.push(4, unique_key="doc:7", replace_pending=True, debounce=0.001) == first
    task = queue.pull()
    assert (task.id, task.payload) == (first, 4)
    # A task being delivered is never changed.
    left = queue.push_unique(5, "doc:7", replace_pending=True)
    assert left == (first, False) and not left.merged
    task.finish()
    assert queue.count() == 0
    for bad in (
        {"replace_pending": True},
        {"unique_key": "k", "debounce": 0},
        {"unique_key": "k", "debounce": -1},
        {"unique_key": "k", "replace_pending": True, "group": "g"},
    ):
        with pytest.raises(tq.InvalidArgumentError):
            queue.push(6, **bad)
    assert queue.count() == 0


def test_unique_for_keeps_the_key_reserved_after_the_task_is_done(queue):
    first = queue.push_unique(1, "daily-report", unique_for=0.5)
    queue.pull().finish()
    assert queue.push_unique(1, "daily-report") == (first.id, False)
    time.sleep(0.6)
    assert queue.push_unique(1, "daily-report").created


def test_keys_are_per_queue_and_a_dead_task_gives_its_key_up(path):
    with fast_retries(path, max_attempts=1) as queue, tq.Queue(path, queue="other") as other:
        first = queue.push_unique(1, "k")
        assert other.push_unique(1, "k").created
        queue.pull().fail()
        assert queue.count("dead") == 1
        assert queue.push_unique(1, "k").id != first.id


# --- Heartbeats -------------------------------------------------------------------


def test_extend_keeps_a_long_task_from_other_workers(queue):
    queue.push(1)
    task = queue.pull(lease=0.3)
    for _ in range(3):
        time.sleep(0.15)
        task.extend(0.3)
    assert queue.pull() is None  # 0.45 s after the pull, the lease still holds
    task.extend(datetime.timedelta(seconds=60))
    task.finish()


def test_extend_after_the_lease_was_taken_raises_not_held_and_ends_the_delivery(queue):
    queue.push(1)
    lost = queue.pull(lease=0.01)
    time.sleep(0.05)
    current = queue.pull()
    with pytest.raises(tq.NotHeldError):
        lost.extend(30)
    assert lost.closed
    with pytest.raises(tq.NotHeldError, match=f"task {lost.id}"):
        lost.finish()
    current.finish()


# --- Finish and pull ---------------------------------------------------------------


def test_finish_and_pull_walks_the_backlog(queue):
    ids = [queue.push({"n": n}) for n in range(5)]
    seen = []
    task = queue.pull()
    while task is not None:
        seen.append(task.id)
        following = task.finish_and_pull(lease=60)
        assert task.closed
        task = following
    assert seen == ids
    assert queue.counts() == {"pending": 0, "leased": 0, "done": 0, "dead": 0, "cancelled": 0}


def test_finish_and_pull_waits_for_the_next_task(queue):
    queue.push(1)
    task = queue.pull()
    pusher = threading.Timer(0.2, lambda: queue.push(2))
    pusher.start()
    started = time.monotonic()
    following = task.finish_and_pull(timeout=10)
    pusher.join()
    assert following is not None and following.payload == 2
    assert 0.15 < time.monotonic() - started < 5
    assert queue.count("leased") == 1  # the first is finished, the second held
    assert following.finish_and_pull(timeout=0.1) is None
    assert queue.counts() == {"pending": 0, "leased": 0, "done": 0, "dead": 0, "cancelled": 0}


def test_finish_and_pull_of_a_lost_delivery_finishes_and_claims_nothing(queue):
    queue.push(1)
    lost = queue.pull(lease=0.01)
    time.sleep(0.05)
    current = queue.pull()
    queue.push(2)
    with pytest.raises(tq.NotHeldError):
        lost.finish_and_pull()
    assert queue.counts() == {"pending": 1, "leased": 1, "done": 0, "dead": 0, "cancelled": 0}
    current.finish()


# --- The task's fields --------------------------------------------------------------


def test_a_pulled_task_carries_its_fields(queue):
    due = datetime.datetime(2001, 2, 3, 4, 5, 6, 789000, tzinfo=datetime.timezone.utc)
    pushed = queue.push({"x": 1}, run_at=due, priority=3, max_attempts=7)
    task = queue.pull()
    assert (task.id, task.attempts, task.priority, task.max_attempts) == (pushed, 1, 3, 7)
    assert task.run_at == due and task.run_at.tzinfo is datetime.timezone.utc
    assert task.state is tq.State.LEASED and task.last_error is None
    with pytest.raises(AttributeError):
        task.priority = 5  # read-only
    task.finish()


def test_fields_stay_readable_after_the_task_is_closed_or_finished(queue):
    queue.push(1, priority=4)
    queue.push(2, priority=3)
    closed = queue.pull()
    closed.close()
    finished = queue.pull()
    finished.finish()
    finished.close()
    assert (closed.priority, closed.state, closed.max_attempts) == (
        4,
        tq.State.LEASED,
        tq.DEFAULT_MAX_ATTEMPTS,
    )
    assert (finished.priority, finished.payload) == (3, 2)


def test_a_task_pushed_without_delay_is_due_about_now(queue):
    before = datetime.datetime.now(datetime.timezone.utc)
    queue.push(1)
    task = queue.pull()
    assert abs((task.run_at - before).total_seconds()) < 5
    task.finish()


# --- Looking at and after the backlog -------------------------------------------------


def test_oldest_ready_age(queue):
    assert queue.oldest_ready_age() is None
    queue.push(1, delay=60)
    assert queue.oldest_ready_age() is None  # not ready yet
    queue.push(2)
    time.sleep(0.2)
    age = queue.oldest_ready_age()
    assert 0.15 <= age < 5


def test_list_pages_through_a_state_by_id(queue):
    ids = [queue.push({"n": n}) for n in range(7)]
    first = queue.list("pending", limit=3)
    assert [task.id for task in first] == ids[:3]
    second = queue.list("pending", after_id=first[-1].id, limit=3)
    assert [task.id for task in second] == ids[3:6]
    last = queue.list("pending", after_id=second[-1].id, limit=3)
    assert [task.id for task in last] == ids[6:]
    assert queue.list("pending", limit=0) == []
    assert queue.list("leased") == []
    snapshot = first[0]
    assert (snapshot.payload, snapshot.state, snapshot.attempts) == ({"n": 0}, tq.State.PENDING, 0)
    assert repr(snapshot) == f"<tq.TaskSnapshot id={ids[0]} state=pending attempts=0 raw=b'{{\"n\":0}}'>"
    for method in ("finish", "fail", "extend", "close"):
        assert not hasattr(snapshot, method)
    with pytest.raises(AttributeError):
        snapshot.id = 5


def test_iter_tasks_walks_every_page(queue):
    ids = queue.push_many([{"n": n} for n in range(25)])
    assert [task.id for task in queue.iter_tasks(page_size=10)] == ids
    assert [task.id for task in queue.iter_tasks("pending", page_size=25)] == ids
    assert list(queue.iter_tasks("dead")) == []
    with pytest.raises(tq.InvalidArgumentError, match="page_size must be between 1"):
        queue.iter_tasks(page_size=0)


def test_listed_tasks_are_not_held(queue):
    queue.push(1)
    [snapshot] = queue.list()
    task = queue.pull()  # the snapshot did not claim it
    assert task.id == snapshot.id
    task.finish()


def test_checkpoint_empties_the_write_ahead_log(queue):
    queue.push_many(range(200))
    assert queue.wal_size() > 0
    assert queue.checkpoint() == 0
    assert queue.wal_size() == 0
    assert queue.count() == 200


HOLD_A_READ_SNAPSHOT = """
import sqlite3, sys
connection = sqlite3.connect(sys.argv[1], isolation_level=None)
connection.execute("BEGIN")
connection.execute("SELECT count(*) FROM tq_tasks").fetchone()
print("reading", flush=True)
sys.stdin.readline()
connection.execute("COMMIT")
"""


def test_checkpoint_with_a_reader_in_the_log_raises_busy_and_keeps_the_log(path):
    with tq.Queue(path, busy_timeout=0.1) as queue:
        queue.push(1)
        # Another process (with its own SQLite) reads a snapshot in the log.
        reader = subprocess.Popen(
            [sys.executable, "-c", HOLD_A_READ_SNAPSHOT, str(path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=child_env(),
        )
        try:
            assert reader.stdout.readline() == "reading\n"
            queue.push_many(range(100))  # commits after the reader's snapshot
            with pytest.raises(tq.BusyError, match="only partly checkpointed"):
                queue.checkpoint()
            assert queue.wal_size() > 0
            reader.stdin.write("\n")
            reader.stdin.flush()
            assert reader.wait(10) == 0
        finally:
            reader.kill()
            reader.wait()
        assert queue.checkpoint() == 0
        assert queue.count() == 101
