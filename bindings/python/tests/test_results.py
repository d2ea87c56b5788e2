"""Results, progress and waiting for a task's outcome."""

import datetime
import threading
import time

import pytest

import tq


def test_a_result_is_kept_without_history_for_any_handle_to_read(path):
    with tq.Queue(path) as queue, tq.Queue(path) as other:
        task_id = queue.push({"file": "a.png"})
        task = queue.pull()
        task.finish(result={"width": 640})
        with pytest.raises(tq.NotHeldError, match="already finished"):
            task.finish()
        snapshot = other.task(task_id)
        assert snapshot.state == tq.State.DONE
        assert (snapshot.payload, snapshot.result, snapshot.raw_result) == (
            {"file": "a.png"},
            {"width": 640},
            b'{"width":640}',
        )
        assert (snapshot.progress, snapshot.raw_progress) == (None, None)
        assert other.task(task_id + 1) is None


def test_a_result_given_as_json_text_is_kept_exactly(path):
    with tq.Queue(path, keep_history=True) as queue:
        first = queue.push(1)
        queue.pull().finish(result='{"a": 1,  "b": [true]}')
        second = queue.push(2)
        queue.pull().finish(result="null")
        assert queue.task(first).raw_result == b'{"a": 1,  "b": [true]}'
        null = queue.task(second)
        assert (null.result, null.raw_result) == (None, b"null")
        listed = [snapshot.raw_result for snapshot in queue.list("done")]
        assert listed == [b'{"a": 1,  "b": [true]}', b"null"]


@pytest.mark.parametrize(
    "result, error, message",
    [
        ('{"a":', tq.InvalidJSONError, "the result is not JSON"),
        ("", tq.InvalidJSONError, "the result is not JSON"),
        ('{}\0{"a":1}', tq.InvalidJSONError, "NUL byte"),
        ('"' + "x" * 40 + '"', tq.InvalidArgumentError, "limit is 16"),
    ],
)
def test_a_bad_result_changes_nothing(path, result, error, message):
    with tq.Queue(path, max_payload_len=16) as queue:
        task_id = queue.push(1)
        task = queue.pull()
        with pytest.raises(error, match=message):
            task.finish(result=result)
        with pytest.raises(TypeError):
            task.finish(result=object())
        assert queue.task(task_id).state == tq.State.LEASED
        task.finish(result=True)
        assert queue.task(task_id).result is True


def test_progress_is_read_while_the_task_runs(queue):
    task_id = queue.push({"encode": 1})
    task = queue.pull()
    task.extend(60, progress={"done": 10})
    snapshot = queue.task(task_id)
    assert (snapshot.state, snapshot.progress, snapshot.result) == (tq.State.LEASED, {"done": 10}, None)
    task.extend(datetime.timedelta(minutes=1), progress="[20]")
    with pytest.raises(tq.InvalidJSONError):
        task.extend(60, progress="nope")
    assert queue.task(task_id).raw_progress == b"[20]"
    task.extend(60)
    assert queue.task(task_id).progress == [20]
    queue.cancel_task(task_id)
    with pytest.raises(tq.CancelledError):
        task.extend(60, progress=30)


def test_wait_returns_the_outcome_once_the_task_ends(queue):
    task_id = queue.push({"job": 1})
    task = queue.pull()
    threading.Timer(0.2, lambda: task.finish(result={"ok": True})).start()
    snapshot = queue.wait(task_id, timeout=10)
    assert (snapshot.state, snapshot.result) == (tq.State.DONE, {"ok": True})
    # An ended task answers at once, with or without a timeout.
    assert queue.wait(task_id).result == {"ok": True}
    assert queue.wait(task_id, timeout=0).result == {"ok": True}


def test_wait_returns_a_dead_task_with_its_reason(path):
    with tq.Queue(path, max_attempts=1) as queue:
        task_id = queue.push(1)
        queue.pull().fail("broken")
        snapshot = queue.wait(task_id, timeout=datetime.timedelta(seconds=5))
        assert (snapshot.state, snapshot.last_error, snapshot.result) == (tq.State.DEAD, "broken", None)


def test_wait_returns_none_when_the_timeout_passes(queue):
    task_id = queue.push(1)
    start = time.monotonic()
    assert queue.wait(task_id, timeout=0.3) is None
    assert 0.3 <= time.monotonic() - start < 5
    assert queue.wait(task_id, timeout=0) is None


def test_wait_refuses_a_task_it_cannot_see_end(queue):
    task_id = queue.push(1)
    with pytest.raises(tq.InvalidArgumentError, match="no task"):
        queue.wait(task_id + 1, timeout=1)
    # Finished without a result and without history: not kept.
    queue.pull().finish()
    with pytest.raises(tq.InvalidArgumentError, match="no task"):
        queue.wait(task_id, timeout=1)
    with pytest.raises(tq.InvalidArgumentError):
        queue.wait(task_id, timeout=-1)


def test_wait_ends_when_the_queue_is_closed_or_interrupted(path):
    for stop, error in ((tq.Queue.close, tq.ClosedError), (tq.Queue.interrupt, tq.Interrupted)):
        queue = tq.Queue(path)
        task_id = queue.push(1)
        outcome = []

        def wait():
            try:
                queue.wait(task_id)
            except tq.Error as exception:
                outcome.append(exception)

        waiter = threading.Thread(target=wait)
        waiter.start()
        time.sleep(0.2)
        stop(queue)
        waiter.join(5)
        assert not waiter.is_alive()
        assert [type(exception) for exception in outcome] == [error]
        queue.close()


def test_a_cancel_ends_one_wait_and_leaves_the_others(queue):
    task_id = queue.push(1)
    cancel = tq.Cancel()
    outcome = []

    def wait():
        try:
            queue.wait(task_id, cancel=cancel)
        except tq.Interrupted as exception:
            outcome.append(exception)

    waiter = threading.Thread(target=wait)
    waiter.start()
    time.sleep(0.2)
    cancel.trigger()
    waiter.join(5)
    assert not waiter.is_alive() and len(outcome) == 1
    assert queue.wait(task_id, timeout=0.05) is None, "the queue's other waits go on"
    with pytest.raises(TypeError):
        queue.wait(task_id, cancel=object())


def test_result_retention_bounds_how_long_a_result_is_kept(path):
    with tq.Queue(path, result_retention=0.001) as queue:
        first = queue.push(1)
        queue.pull().finish(result=1)
        time.sleep(0.02)
        queue.push(2)
        # A later finish with a result deletes the results whose time passed.
        queue.pull().finish(result=2)
        assert queue.task(first) is None
    for retention in (0, -1, datetime.timedelta(days=367)):
        with pytest.raises(tq.InvalidArgumentError):
            tq.Queue(path, result_retention=retention)
