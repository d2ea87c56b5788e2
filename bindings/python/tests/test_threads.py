"""One Queue shared by threads: every task delivered and finished exactly once,
and closing under running calls neither crashes nor loses a call's result."""

import threading
import time

import pytest

import tq

THREADS = 8
PER_THREAD = 150


@pytest.mark.parametrize("durability", ["full", "normal"])
def test_eight_threads_push_and_pull_with_exactly_once_accounting(path, durability):
    total = THREADS * PER_THREAD
    pushed = {}  # id -> payload
    finished = []  # (id, payload) per finish
    errors = []
    lock = threading.Lock()
    start = threading.Barrier(THREADS)

    with tq.Queue(path, durability=durability) as queue:

        def finish_one(task):
            task.finish()
            with lock:
                finished.append((task.id, task.payload))

        def work(thread):
            try:
                start.wait()
                for n in range(PER_THREAD):
                    payload = {"thread": thread, "n": n}
                    task_id = queue.push(payload)
                    with lock:
                        pushed[task_id] = payload
                    task = queue.pull()
                    if task is not None:
                        finish_one(task)
                while True:
                    with lock:
                        if len(finished) >= total:
                            return
                    task = queue.pull(timeout=0.05)
                    if task is not None:
                        finish_one(task)
            except BaseException as error:  # reported by the main thread
                errors.append(error)

        threads = [threading.Thread(target=work, args=(t,)) for t in range(THREADS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert not any(thread.is_alive() for thread in threads)
        assert errors == []

        assert len(pushed) == total  # every id distinct
        finished_ids = [task_id for task_id, _ in finished]
        assert sorted(finished_ids) == sorted(pushed)  # each exactly once
        assert all(pushed[task_id] == payload for task_id, payload in finished)
        assert queue.counts() == {"pending": 0, "leased": 0, "done": 0, "dead": 0, "cancelled": 0}


def test_close_while_threads_are_inside_calls(path):
    queue = tq.Queue(path, durability="normal")
    outcomes = []
    running = threading.Barrier(5)

    def hammer(thread):
        running.wait()
        pushed = finished = 0
        try:
            while True:
                queue.push({"thread": thread})
                pushed += 1
                task = queue.pull()
                if task is not None:
                    task.finish()
                    finished += 1
                queue.count()
        except tq.ClosedError:
            outcomes.append(("closed", pushed, finished))
        except BaseException as error:  # reported by the main thread
            outcomes.append(("error", error, None))

    threads = [threading.Thread(target=hammer, args=(t,)) for t in range(4)]
    for thread in threads:
        thread.start()
    running.wait()
    time.sleep(0.2)
    queue.close()
    for thread in threads:
        thread.join(30)
    assert not any(thread.is_alive() for thread in threads)
    assert [kind for kind, _, _ in outcomes] == ["closed"] * 4
    # A call either ran whole before the handle closed or was refused before
    # reaching the library: the file holds exactly what the calls reported.
    pushed = sum(count for _, count, _ in outcomes)
    finished = sum(count for _, _, count in outcomes)
    assert pushed > 0
    with tq.Queue(path) as reopened:
        assert reopened.count("pending") + reopened.count("leased") == pushed - finished


def test_a_task_may_be_finished_by_another_thread_than_the_one_that_pulled_it(queue):
    queue.push({"x": 1})
    task = queue.pull()
    done = []
    worker = threading.Thread(target=lambda: (task.finish(), done.append(True)))
    worker.start()
    worker.join(10)
    assert done == [True]
    assert queue.count("leased") == 0


def finish_recording(task, barrier, results):
    """Finishes ``task`` once ``barrier`` lets all go; records the outcome."""
    barrier.wait()
    try:
        task.finish()
        results.append("finished")
    except tq.NotHeldError:
        results.append("not held")


def test_one_task_finished_by_two_threads_at_once_is_finished_once(queue):
    for _ in range(50):
        queue.push(1)
        task = queue.pull()
        results = []
        barrier = threading.Barrier(2)
        threads = [threading.Thread(target=finish_recording, args=(task, barrier, results)) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(10)
        assert sorted(results) == ["finished", "not held"]
    assert queue.counts() == {"pending": 0, "leased": 0, "done": 0, "dead": 0, "cancelled": 0}


def test_worker_threads_drain_with_finish_and_pull_and_stop_on_interrupt(path):
    total = 400
    delivered = []
    outcomes = []
    lock = threading.Lock()
    with tq.Queue(path, durability="normal") as queue:
        pushed = set(queue.push_many({"n": n} for n in range(total)))

        def worker():
            try:
                task = queue.pull(timeout=30)
                while task is not None:
                    with lock:
                        delivered.append(task.id)
                    # Once the backlog is drained, this waits for more work.
                    task = task.finish_and_pull(timeout=30)
                outcomes.append("timed out")
            except tq.Interrupted:
                outcomes.append("interrupted")
            except BaseException as error:  # reported by the main thread
                outcomes.append(error)

        threads = [threading.Thread(target=worker) for _ in range(4)]
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + 60
        while (queue.count("pending") or queue.count("leased")) and time.monotonic() < deadline:
            time.sleep(0.01)
        queue.interrupt()  # the shutdown: interrupt, join, close
        for thread in threads:
            thread.join(10)
        assert not any(thread.is_alive() for thread in threads)
        assert outcomes == ["interrupted"] * 4
        assert sorted(delivered) == sorted(pushed)  # each exactly once
        assert queue.counts() == {"pending": 0, "leased": 0, "done": 0, "dead": 0, "cancelled": 0}
