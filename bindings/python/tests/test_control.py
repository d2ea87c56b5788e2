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


def test_a_capped_queue_refuses_a_push_beyond_its_cap_with_full(path, queue):
    assert queue.max_pending() is None
    queue.set_max_pending(2)
    assert queue.max_pending() == 2
    queue.push(1)
    with pytest.raises(tq.errors.FullError, match="cap is 2"):
        queue.push_many([2, 3])
    assert queue.count(tq.State.PENDING) == 1
    queue.push(2)
    with pytest.raises(tq.FullError) as refused:
        queue.push(3, wait_for_room=0.02)
    assert isinstance(refused.value, tq.Error) and refused.value.status == -11
    task = queue.pull()
    assert queue.push(3, wait_for_room=5) > 0
    task.finish()
    with tq.Queue(path) as other:
        assert other.max_pending() == 2
        other.set_max_pending(None)
    assert queue.max_pending() is None
    queue.push(4)


def test_a_rate_limit_allows_that_many_claims_per_window(queue):
    assert queue.rate_limit() is None
    with pytest.raises(tq.InvalidArgumentError, match="1 to 100000"):
        queue.set_rate_limit(0, 1)
    queue.set_rate_limit(2, 0.4)
    assert queue.rate_limit() == (2, 0.4)
    queue.push_many([1, 2, 3])
    assert len(queue.pull_many(3)) == 2
    assert queue.pull() is None
    assert queue.pull(timeout=20) is not None
    queue.set_rate_limit(None, 0)
    assert queue.rate_limit() is None


def test_a_watched_task_is_told_of_its_cancellation_by_another_handle(path, queue):
    task_id = queue.push({"long": True})
    task = queue.pull()
    told = []
    with task.watch_cancellation(told.append) as watch, tq.Queue(path) as other:
        assert watch.running and not watch.cancelled.is_set()
        task.extend(60)  # the holder keeps using its task meanwhile
        assert other.cancel_task(task_id, "stop") == tq.State.LEASED
        assert watch.cancelled.wait(20)
    assert told == [task] and not watch.running
    with pytest.raises(tq.CancelledError):
        task.finish()


def test_a_watch_ends_with_its_block_the_delivery_the_task_or_the_queue(path, queue):
    for n in range(4):
        queue.push(n)
    with queue.pull() as task:
        with task.watch_cancellation() as watch:
            with pytest.raises(tq.InvalidArgumentError, match="already watched"):
                task.watch_cancellation()
        assert not watch.running and not watch.cancelled.is_set()
        task.watch_cancellation().stop()  # a new watch once the last one ended
        task.finish()
        with pytest.raises(tq.NotHeldError):
            task.watch_cancellation()

    task = queue.pull()
    watch = task.watch_cancellation()
    task.finish()  # seen at the watch's next look, within about a second
    assert watch.join(20) and not watch.cancelled.is_set()

    task = queue.pull()
    watch = task.watch_cancellation()
    task.close()
    assert not watch.running

    other = tq.Queue(path)
    task = other.pull()
    watch = task.watch_cancellation()
    other.close()
    assert watch.join(20) and not watch.cancelled.is_set()
    task.close()


def test_fair_keys_share_deliveries_by_weight(path, queue):
    assert queue.fair_weight("a") == 1.0
    with pytest.raises(tq.InvalidArgumentError, match="weight"):
        queue.set_fair_weight("a", 0)
    with pytest.raises(TypeError):
        queue.set_fair_weight("a", "2")
    queue.set_fair_weight("a", 2)
    with tq.Queue(path) as other:
        assert other.fair_weight("a") == 2.0
    # b's tasks come first in push order; the turns give a two in three.
    queue.push_many([{"key": "b"}] * 10, fair_key="b")
    for _ in range(10):
        queue.push({"key": "a"}, fair_key="a")
    with pytest.raises(tq.InvalidArgumentError, match="fairness key"):
        queue.push(1, fair_key="")
    delivered = []
    for _ in range(9):
        task = queue.pull()
        delivered.append(task.payload["key"])
        task.finish()
    assert delivered.count("a") == 6
    assert delivered.count("b") == 3


def test_a_key_cap_refuses_a_push_beyond_it_and_not_other_keys(path, queue):
    assert queue.max_pending_per_key() is None
    queue.set_max_pending_per_key(1)
    queue.set_key_max_pending("b", 2)
    with tq.Queue(path) as other:
        assert other.max_pending_per_key() == 1
        assert other.key_max_pending("a") == 1
        assert other.key_max_pending("b") == 2
    queue.push({"key": "a"}, fair_key="a")
    with pytest.raises(tq.FullError, match="fairness key 'a'"):
        queue.push({"key": "a"}, fair_key="a")
    with pytest.raises(tq.FullError):
        queue.push_many([{"key": "b"}] * 3, fair_key="b")
    queue.push_many([{"key": "b"}] * 2, fair_key="b")
    assert queue.count(tq.State.PENDING) == 3
    with pytest.raises(tq.InvalidArgumentError):
        queue.set_key_max_pending("a\0b", 1)
    queue.set_key_max_pending("b", None)
    assert queue.key_max_pending("b") == 1
    queue.set_max_pending_per_key(0)
    assert queue.key_max_pending("a") is None
    queue.push({"key": "a"}, fair_key="a")
