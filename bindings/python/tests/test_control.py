"""Control over running work: cancelling a task, pausing a queue, snoozing a
delivery."""

import threading
import time

import pytest

import tq


def test_a_pending_task_cancelled_leaves_the_line_and_is_kept_with_its_reason(path):
    with tq.Queue(path, keep_history=True) as queue:
        task_id = queue.push({"report": 1})
        assert queue.cancel_task(task_id, "not needed") == tq.State.CANCELLED
        assert queue.pull() is None
        [cancelled] = queue.list("cancelled")
        assert (cancelled.id, cancelled.state, cancelled.last_error) == (
            task_id,
            tq.State.CANCELLED,
            "not needed",
        )
        assert queue.counts()["cancelled"] == 1
        assert queue.purge(0, "cancelled") == 1


def test_a_leased_task_cancelled_tells_its_holder_and_is_never_delivered_again(queue):
    task_id = queue.push({"long": True})
    task = queue.pull()
    assert queue.cancel_task(task_id) == tq.State.LEASED
    assert queue.pull() is None
    with pytest.raises(tq.CancelledError, match="cancelled"):
        task.extend(60)
    assert task.closed
    with pytest.raises(tq.NotHeldError):
        task.finish()
    assert queue.counts()["leased"] == 0


def test_cancel_refuses_an_unknown_or_done_task_and_changes_nothing(path):
    with tq.Queue(path, keep_history=True) as queue:
        with pytest.raises(tq.InvalidArgumentError, match="no task 999"):
            queue.cancel_task(999)
        done = queue.push(1)
        queue.pull().finish()
        with pytest.raises(tq.InvalidArgumentError, match="done"):
            queue.cancel_task(done)
        assert queue.counts()["done"] == 1
        with pytest.raises(TypeError):
            queue.cancel_task("1")


def test_a_paused_queue_delivers_nothing_and_a_waiting_pull_wakes_on_resume(path, queue):
    assert queue.paused_until() is None
    queue.pause()
    assert queue.paused_until() == tq.UNTIL_RESUMED
    task_id = queue.push(["held back"])
    assert queue.pull() is None
    got = []
    waiter = threading.Thread(target=lambda: got.append(queue.pull(timeout=20)))
    waiter.start()
    time.sleep(0.2)
    assert waiter.is_alive(), "the pull waits through the pause"
    with tq.Queue(path) as other:
        other.resume()
    waiter.join(30)
    assert got[0].id == task_id
    got[0].finish()


def test_a_pause_until_a_time_ends_by_itself_and_one_in_the_past_is_refused(queue):
    with pytest.raises(tq.InvalidArgumentError, match="future"):
        queue.pause(time.time() - 10)
    assert queue.paused_until() is None
    until = time.time() + 0.3
    queue.pause(until)
    assert queue.paused_until() == pytest.approx(until, abs=0.002)
    queue.push(1)
    assert queue.pull() is None
    task = queue.pull(timeout=20)
    assert task is not None
    assert queue.paused_until() is None


def test_snooze_hands_a_task_back_without_counting_an_attempt(path):
    with tq.Queue(path, max_attempts=1) as queue:
        task_id = queue.push(["not yet"])
        task = queue.pull()
        task.snooze()
        assert task.closed
        with pytest.raises(tq.NotHeldError):
            task.snooze()
        again = queue.pull()
        assert (again.id, again.attempts) == (task_id, 1)
        again.snooze(0.3)
        assert queue.pull() is None
        later = queue.pull(timeout=20)
        assert (later.id, later.attempts) == (task_id, 1)
        later.finish()


def test_a_concurrency_limit_caps_the_leased_tasks_and_a_finish_frees_a_slot(path, queue):
    assert queue.concurrency_limit() is None
    with pytest.raises(tq.InvalidArgumentError, match="at least 1"):
        queue.set_concurrency_limit(0)
    queue.set_concurrency_limit(1)
    assert queue.concurrency_limit() == 1
    queue.push_many([1, 2])
    first = queue.pull()
    assert queue.pull() is None
    first.finish()
    second = queue.pull()
    assert second is not None
    with tq.Queue(path) as other:
        assert other.concurrency_limit() == 1
        other.set_concurrency_limit(None)
    assert queue.concurrency_limit() is None
    second.finish()
