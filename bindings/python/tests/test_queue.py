"""Round trips and the queue's behaviour through the Python API."""

import datetime
import time

import pytest

import tq


def test_push_pull_finish_round_trip(queue):
    first = queue.push({"file": "a.mp4"})
    second = queue.push({"file": "b.mp4"})
    assert second > first > 0

    task = queue.pull()
    assert isinstance(task, tq.Task)
    assert (task.id, task.attempts, task.payload) == (first, 1, {"file": "a.mp4"})
    token = task.token
    assert isinstance(token, int) and token != 0
    assert queue.counts() == {"pending": 1, "leased": 1, "done": 0, "dead": 0, "cancelled": 0}
    task.finish()
    assert task.closed and task.token == token
    assert queue.counts() == {"pending": 1, "leased": 0, "done": 0, "dead": 0, "cancelled": 0}

    task = queue.pull()
    assert (task.id, task.payload) == (second, {"file": "b.mp4"})
    task.finish()
    assert queue.pull() is None
    assert queue.counts() == {"pending": 0, "leased": 0, "done": 0, "dead": 0, "cancelled": 0}


def test_tasks_come_out_in_push_order(queue):
    ids = [queue.push({"n": n}) for n in range(20)]
    pulled = []
    while (task := queue.pull()) is not None:
        pulled.append((task.id, task.payload["n"]))
        task.finish()
    assert pulled == list(zip(ids, range(20), strict=True))


def test_data_survives_reopening(path):
    with tq.Queue(path) as queue:
        pushed = queue.push([1, "two", {"three": 3.0}])
    with tq.Queue(path) as queue:
        task = queue.pull()
        assert (task.id, task.payload) == (pushed, [1, "two", {"three": 3.0}])
        task.finish()


def test_data_pushed_through_one_handle_is_seen_by_another(path):
    with tq.Queue(path) as producer, tq.Queue(path) as consumer:
        pushed = producer.push({"x": 1})
        task = consumer.pull()
        assert task.id == pushed
        task.finish()
        assert producer.count("pending") == 0


def test_an_unfinished_task_comes_back_after_its_lease_with_attempts_counted(queue):
    pushed = queue.push({"x": 1})
    first = queue.pull(lease=1)
    assert first.attempts == 1
    assert queue.pull() is None  # leased, not yet expired
    time.sleep(1.1)
    second = queue.pull()
    assert (second.id, second.attempts) == (pushed, 2)
    with pytest.raises(tq.NotHeldError):
        first.finish()  # the first holder's delivery was taken
    second.finish()
    assert queue.counts() == {"pending": 0, "leased": 0, "done": 0, "dead": 0, "cancelled": 0}


def test_a_holder_past_its_lease_may_finish_while_nobody_took_the_task(queue):
    queue.push({"x": 1})
    task = queue.pull(lease=0.01)
    time.sleep(0.05)
    task.finish()
    assert queue.count("leased") == 0


def test_lease_accepts_a_timedelta(queue):
    queue.push(1)
    task = queue.pull(lease=datetime.timedelta(milliseconds=20))
    time.sleep(0.06)
    again = queue.pull()
    assert again.id == task.id and again.attempts == 2
    again.finish()


def test_recover_leaves_tasks_of_this_live_process_alone(queue):
    queue.push(1)
    task = queue.pull(lease=60)
    assert queue.recover() == 0
    assert queue.count(tq.State.LEASED) == 1
    task.finish()


def test_recover_takes_back_expired_leases(queue):
    queue.push(1)
    task = queue.pull(lease=0.01)
    time.sleep(0.05)
    assert queue.recover() == 1
    assert queue.counts() == {"pending": 1, "leased": 0, "done": 0, "dead": 0, "cancelled": 0}
    with pytest.raises(tq.NotHeldError):
        task.finish()


def test_delay_holds_a_task_back(queue):
    queue.push({"later": True}, delay=60)
    now = queue.push({"later": False})
    task = queue.pull()
    assert task.id == now
    task.finish()
    assert queue.pull() is None
    assert queue.count("pending") == 1


def test_a_delayed_task_is_delivered_when_due(queue):
    pushed = queue.push({"later": True}, delay=datetime.timedelta(seconds=1))
    started = time.monotonic()
    assert queue.pull() is None
    task = queue.pull(timeout=10)
    assert task is not None and task.id == pushed
    assert time.monotonic() - started > 0.8
    task.finish()


def test_run_at_in_the_past_is_ready_and_in_the_future_is_not(queue):
    past = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(hours=1)
    ready = queue.push("1", run_at=past)
    queue.push("2", run_at=time.time() + 3600)
    task = queue.pull()
    assert task.id == ready
    task.finish()
    assert queue.pull() is None
    assert queue.count() == 1


def test_history_is_kept_and_purged(path):
    with tq.Queue(path, keep_history=True) as queue:
        for n in range(3):
            queue.push(n)
        for _ in range(3):
            queue.pull().finish()
        assert queue.counts() == {"pending": 0, "leased": 0, "done": 3, "dead": 0, "cancelled": 0}
        assert queue.purge(older_than=3600) == 0
        assert queue.purge() == 3
        assert queue.count(tq.State.DONE) == 0


def test_without_history_finished_tasks_are_deleted(queue):
    queue.push(1)
    queue.pull().finish()
    assert queue.count("done") == 0
    assert queue.purge() == 0


def test_count_accepts_a_state_its_name_or_its_number(queue):
    queue.push(1)
    assert queue.count(tq.State.PENDING) == queue.count("PENDING") == queue.count(0) == 1


def test_options_are_accepted(path):
    with tq.Queue(
        path,
        durability=tq.Durability.NORMAL,
        busy_timeout=datetime.timedelta(seconds=1),
        keep_history=False,
        max_payload_len=100,
    ) as queue:
        queue.push({"x": 1})
    with tq.Queue(path, durability="full", busy_timeout=0) as queue:
        assert queue.count() == 1


def test_path_may_be_a_str_or_a_path(path):
    with tq.Queue(str(path)) as queue:
        queue.push(1)
    with tq.Queue(path) as queue:
        assert queue.count() == 1


def test_a_task_closed_without_finishing_stays_leased(queue):
    queue.push(1)
    with queue.pull(lease=60) as task:
        assert not task.closed
    assert task.closed
    assert queue.count("leased") == 1
    task.close()  # idempotent


def test_task_attributes_stay_readable_after_the_task_is_freed(queue):
    queue.push({"keep": "me"})
    task = queue.pull()
    task.finish()
    assert (task.raw, task.payload, task.attempts) == (b'{"keep":"me"}', {"keep": "me"}, 1)


def test_pull_timeout_waits_then_returns_none(queue):
    start = time.monotonic()
    assert queue.pull(timeout=0.3) is None
    assert 0.3 <= time.monotonic() - start < 2


def test_pull_timeout_zero_does_not_wait(queue):
    start = time.monotonic()
    assert queue.pull(timeout=0) is None
    assert queue.pull() is None
    assert time.monotonic() - start < 1


def test_repr_shows_state(queue, path):
    assert repr(queue) == f"<tq.Queue {str(path)!r} queue='default' open>"
    queue.push({"a": 1})
    task = queue.pull()
    assert repr(task) == f"<tq.Task id={task.id} attempts=1 raw=b'{{\"a\":1}}'>"
    task.finish()
    queue.close()
    assert repr(queue).endswith("closed>")
