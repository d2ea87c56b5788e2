"""Events and durable sleep: a handler waits for an event (the task is
handed back meanwhile) and reads the same answer at its next delivery; a
wait times out; a sleep hands the task back and returns on replay."""

import threading
import time

import pytest

import tq


def test_a_handler_waits_for_a_signal_and_reads_it_on_replay(path):
    with tq.Queue(path, keep_history=True) as queue:
        task_id = queue.push({"order": 42})
        calls = []

        def handler(task):
            task.step("charge", lambda: {"charged": True})
            paid = task.wait_for("payment:42", timeout=600)
            calls.append(paid)

        first = queue.pull()
        with pytest.raises(tq.Suspended):
            handler(first)
        with pytest.raises(tq.NotHeldError):
            first.finish()
        assert queue.pull() is None
        assert queue.task(task_id).attempts == 0

        assert queue.signal("payment:42", {"amount": 10}) == task_id
        second = queue.pull(timeout=5)
        assert second.id == task_id
        handler(second)
        assert calls == [{"amount": 10}]
        assert second.wait_for("payment:42", timeout=600) == {"amount": 10}
        second.finish()


def test_an_event_sent_first_is_kept_and_a_wait_times_out(path):
    with tq.Queue(path) as queue:
        assert queue.signal("early", [1, 2]) is None
        queue.push(1)
        task = queue.pull()
        assert task.wait_for("early", timeout=600) == [1, 2]
        with pytest.raises(tq.EventTimeout):
            task.wait_for("nothing", timeout=0)
        with pytest.raises(tq.InvalidJSONError):
            queue.signal("k", b"{bad")
        with pytest.raises(tq.InvalidArgumentError):
            queue.signal("", 1)
        task.finish()


def test_work_leaves_a_suspended_task_waiting(path):
    with tq.Queue(path, keep_history=True) as queue:
        task_id = queue.push(1)
        seen = []
        stop = threading.Event()

        def handler(task):
            stop.set()
            seen.append(task.wait_for("go", timeout=600))

        queue.work(handler, concurrency=1, stop=stop)
        info = queue.task(task_id)
        assert (info.state, info.attempts) == (tq.State.PENDING, 0)
        assert queue.signal("go", {"go": "now"}) == task_id
        stop.clear()
        queue.work(handler, concurrency=1, stop=stop)
        assert seen == [{"go": "now"}]
        assert queue.task(task_id).state == tq.State.DONE


def test_a_durable_sleep_hands_the_task_back_and_returns_on_replay(path):
    with tq.Queue(path) as queue:
        queue.push(1)
        first = queue.pull()
        first.sleep_until("past", 1)
        with pytest.raises(tq.Suspended):
            first.sleep("nap", 0.05)
        time.sleep(0.1)
        second = queue.pull(timeout=5)
        assert second.attempts == 1
        second.sleep("nap", 0.05)
        second.finish()
