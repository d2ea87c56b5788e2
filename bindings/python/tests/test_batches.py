"""Batches: push_many stores all or nothing and names the payload at fault;
pull_many claims several tasks in one call; finish_many reports each task."""

import threading
import time

import pytest

import tq


def test_push_many_stores_in_order_and_returns_the_ids(queue):
    ids = queue.push_many([{"n": 0}, b'{"n": 1}', '{"n": 2}', [3], None])
    assert len(ids) == 5 and ids == sorted(ids)
    pulled = []
    while (task := queue.pull()) is not None:
        pulled.append((task.id, task.payload))
        task.finish()
    assert pulled == list(zip(ids, [{"n": 0}, {"n": 1}, {"n": 2}, [3], None], strict=True))


def test_push_many_takes_any_iterable_and_an_empty_one(queue):
    assert queue.push_many(iter([])) == []
    assert len(queue.push_many({"n": n} for n in range(50))) == 50
    assert queue.count() == 50


def test_push_many_options_apply_to_every_task(queue):
    queue.push(0)
    queue.push_many([1, 2], priority=5, max_attempts=2)
    queue.push_many([3], delay=60)
    tasks = queue.pull_many(10)
    assert [(task.payload, task.priority, task.max_attempts) for task in tasks] == [
        (1, 5, 2),
        (2, 5, 2),
        (0, 0, tq.DEFAULT_MAX_ATTEMPTS),
    ]
    assert queue.finish_many(tasks) == [True, True, True]
    assert queue.count() == 1  # the delayed one


@pytest.mark.parametrize(
    "payloads, error, index",
    [
        ([1, 2, b"{", 3], tq.InvalidJSONError, 2),
        ([b"\xff", 1], tq.InvalidArgumentError, 0),
        ([1, "hello"], tq.InvalidJSONError, 1),
    ],
)
def test_a_bad_payload_fails_the_whole_batch_and_is_named(queue, payloads, error, index):
    with pytest.raises(error) as caught:
        queue.push_many(payloads)
    assert caught.value.index == index
    assert caught.value.message.startswith(f"payload {index}: ")
    assert queue.count() == 0


def test_a_payload_over_the_limit_fails_the_batch(path):
    with tq.Queue(path, max_payload_len=5) as queue:
        with pytest.raises(tq.InvalidArgumentError, match="payload 1: .*limit") as caught:
            queue.push_many([1, [1, 2, 3]])
        assert caught.value.index == 1
        assert queue.count() == 0


def test_a_payload_json_cannot_serialize_is_named_before_anything_is_sent(queue):
    with pytest.raises(TypeError, match="payload 1: Object of type set") as caught:
        queue.push_many([1, {1, 2}, 3])
    assert caught.value.index == 1
    circular = []
    circular.append(circular)
    with pytest.raises(ValueError, match="payload 0: Circular reference") as caught:
        queue.push_many([circular])
    assert caught.value.index == 0
    assert queue.count() == 0


def test_errors_not_about_one_payload_have_no_index(queue):
    queue.close()
    with pytest.raises(tq.ClosedError) as caught:
        queue.push_many([1])
    assert caught.value.index is None


def test_push_many_refuses_bad_options_and_unique_keys(queue):
    with pytest.raises(tq.InvalidArgumentError, match="delay or run_at, not both"):
        queue.push_many([1], delay=1, run_at=1)
    with pytest.raises(TypeError):
        queue.push_many([1], unique_key="k")
    assert queue.count() == 0


def test_pull_many_claims_up_to_n_in_order(queue):
    ids = queue.push_many(range(5))
    first = queue.pull_many(3)
    assert [task.id for task in first] == ids[:3]
    assert all(task.attempts == 1 and task.state is tq.State.LEASED for task in first)
    rest = queue.pull_many(10, lease=60)
    assert [task.id for task in rest] == ids[3:]
    assert queue.pull_many(10) == []
    assert queue.finish_many(first + rest) == [True] * 5


def test_pull_many_waits_for_a_push(queue):
    pusher = threading.Timer(0.2, lambda: queue.push_many([1, 2]))
    pusher.start()
    started = time.monotonic()
    tasks = queue.pull_many(5, timeout=10)
    pusher.join()
    assert 0.15 < time.monotonic() - started < 5
    assert [task.payload for task in tasks] == [1, 2]  # one commit, one claim
    assert queue.finish_many(tasks) == [True, True]
    started = time.monotonic()
    assert queue.pull_many(5, timeout=0.2) == []
    assert time.monotonic() - started >= 0.2


@pytest.mark.parametrize(
    "n, error, match",
    [
        (0, tq.InvalidArgumentError, "room for at least one task"),
        (-1, tq.InvalidArgumentError, "n must be between 0"),
        (2.0, TypeError, "n must be an integer"),
    ],
)
def test_pull_many_refuses_a_bad_count(queue, n, error, match):
    queue.push(1)
    with pytest.raises(error, match=match):
        queue.pull_many(n)
    assert queue.count() == 1


def test_finish_many_reports_each_task(queue):
    queue.push_many(range(4))
    lost = queue.pull(lease=0.01)
    time.sleep(0.05)
    taken = queue.pull()  # the same task, taken by another worker
    assert taken.id == lost.id
    finished_before = queue.pull()
    finished_before.finish()
    live = queue.pull_many(2)
    results = queue.finish_many([live[0], lost, finished_before, live[1], live[0]])
    assert results == [True, False, False, True, True]  # live[0] given twice counts once
    assert all(task.closed for task in live + [lost])
    with pytest.raises(tq.NotHeldError, match="no longer held"):
        lost.finish()
    assert queue.counts() == {"pending": 0, "leased": 1, "done": 0, "dead": 0, "cancelled": 0}
    assert queue.finish_many([taken]) == [True]
    assert queue.finish_many([]) == []


def test_finish_many_with_a_closed_task_finishes_nothing(queue):
    queue.push_many(range(2))
    kept, closed = queue.pull_many(2)
    closed.close()
    with pytest.raises(tq.ClosedError, match=f"task {closed.id} is closed"):
        queue.finish_many([kept, closed])
    assert not kept.closed
    assert queue.count("leased") == 2
    kept.finish()


def test_finish_many_takes_only_tasks(queue):
    queue.push(1)
    [snapshot] = queue.list()
    with pytest.raises(TypeError, match="finish_many takes tq.Task objects, not TaskSnapshot"):
        queue.finish_many([snapshot])


def test_finish_and_pull_many_finishes_and_claims_in_one_call(queue):
    ids = queue.push_many(range(7))
    first = queue.pull_many(3)
    first[1].finish()
    finished, claimed = queue.finish_and_pull_many(first, 3, lease=60)
    assert finished == [True, False, True]
    assert [task.id for task in claimed] == ids[3:6]
    assert queue.count("leased") == 3
    # n 0 only finishes; no tasks only claims.
    finished, none = queue.finish_and_pull_many(claimed, 0)
    assert (finished, none) == ([True, True, True], [])
    finished, last = queue.finish_and_pull_many([], 5)
    assert finished == [] and [task.id for task in last] == ids[6:]
    # Nothing ready: the finish is done, nothing claimed.
    assert queue.finish_and_pull_many(last, 2) == ([True], [])
    assert queue.counts()["pending"] == 0 and queue.count("leased") == 0


def test_finish_and_pull_many_with_a_closed_task_does_nothing(queue):
    queue.push_many(range(3))
    kept, closed = queue.pull_many(2)
    closed.close()
    with pytest.raises(tq.ClosedError, match=f"task {closed.id} is closed"):
        queue.finish_and_pull_many([kept, closed], 1)
    assert queue.count("leased") == 2
    assert queue.counts()["pending"] == 1
    with pytest.raises(TypeError, match="finish_and_pull_many takes tq.Task objects"):
        queue.finish_and_pull_many([1], 1)
    with pytest.raises(tq.InvalidArgumentError):
        queue.finish_and_pull_many([kept], -1)
    assert queue.count("leased") == 2
    kept.finish()


def test_finish_many_from_threads_at_once_finishes_each_task_once(queue):
    queue.push_many(range(40))
    tasks = queue.pull_many(40)
    results = {}
    start = threading.Barrier(4)

    def finish_all(number, order):
        start.wait()
        results[number] = queue.finish_many(order)

    orders = [tasks, tasks[::-1], tasks[10:] + tasks[:10], tasks[::2] + tasks[1::2]]
    threads = [threading.Thread(target=finish_all, args=pair) for pair in enumerate(orders)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not any(thread.is_alive() for thread in threads)
    assert len(results) == 4
    # Each task was finished by exactly one of the calls.
    by_task = {task.id: 0 for task in tasks}
    for number, order in enumerate(orders):
        for task, finished in zip(order, results[number], strict=True):
            by_task[task.id] += finished
    assert set(by_task.values()) == {1}
    assert queue.counts() == {"pending": 0, "leased": 0, "done": 0, "dead": 0, "cancelled": 0}
