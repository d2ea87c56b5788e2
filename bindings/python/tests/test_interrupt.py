"""Waiting pulls: they wait inside the library, wake for a push from this
process or another, and end on Ctrl-C, on close() from another thread, on
interrupt() and on a triggered tq.Cancel."""

import signal
import statistics
import subprocess
import sys
import threading
import time

import pytest
from helpers import child_env, run_python

import tq

WAIT_FOR_A_TASK = """
import sys, time, tq
queue = tq.Queue(sys.argv[1])
print("waiting", flush=True)
try:
    queue.pull(timeout=60)
except KeyboardInterrupt:
    print(time.monotonic(), flush=True)
    raise
print("pull returned", flush=True)
"""

# Generous for a loaded shared machine: a pull waits inside the library for
# at most tq.queue.WAIT_SLICE (0.1 s) before Python runs its signal handler.
INTERRUPT_BOUND_S = 1.0


def test_ctrl_c_interrupts_a_pull_waiting_in_the_library(path):
    tq.Queue(path).close()
    child = subprocess.Popen(
        [sys.executable, "-c", WAIT_FOR_A_TASK, str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=child_env(),
    )
    try:
        assert child.stdout.readline() == "waiting\n"
        time.sleep(0.35)  # well inside the wait, at some point of a slice
        sent = time.monotonic()  # CLOCK_MONOTONIC: the same in both processes
        child.send_signal(signal.SIGINT)
        child.wait(30)
    finally:
        child.kill()
        child.wait()
    stdout, stderr = child.communicate()
    assert "pull returned" not in stdout
    assert stderr.rstrip().endswith("KeyboardInterrupt"), stderr
    assert child.returncode == -signal.SIGINT
    latency = float(stdout) - sent
    assert 0 <= latency < INTERRUPT_BOUND_S, f"KeyboardInterrupt {latency:.3f} s after SIGINT"


def record_waits(monkeypatch):
    """The wait (ms) of every library call a pull makes from now on."""
    waits = []
    real = tq.queue.lib.tq_pull_options_set_wait_ms

    def record(options, wait_ms):
        waits.append(wait_ms)
        return real(options, wait_ms)

    monkeypatch.setattr(tq.queue.lib, "tq_pull_options_set_wait_ms", record)
    return waits


def test_ctrl_c_is_not_delayed_by_a_long_timeout_in_one_call(queue, monkeypatch):
    """Each library call waits at most WAIT_SLICE, whatever the timeout."""
    waits = record_waits(monkeypatch)
    started = time.monotonic()
    assert queue.pull(timeout=0.35) is None
    assert time.monotonic() - started >= 0.35
    assert 4 <= len(waits) <= 10  # 100 + 100 + 100 + the rest, more if woken early
    assert max(waits) == 100 and min(waits) >= 1


def test_a_pull_outside_the_main_thread_waits_in_one_library_call(queue, monkeypatch):
    """Only the main thread runs signal handlers: elsewhere a pull needs no
    slices, and each slice would begin with a claim."""
    waits = record_waits(monkeypatch)
    pulled = []
    thread = threading.Thread(target=lambda: pulled.append(queue.pull(timeout=0.35)))
    thread.start()
    thread.join(30)
    assert pulled == [None]
    assert waits == [350]

    pusher = threading.Timer(0.2, lambda: queue.push(1))
    pusher.start()
    thread = threading.Thread(target=lambda: pulled.append(queue.pull(timeout=float("inf"))))
    thread.start()
    thread.join(30)
    pusher.join()
    assert pulled[1] is not None
    assert waits[1:] == [3_600_000]


def wake_latency(queue, push_from_elsewhere):
    """Seconds between a push (made by ``push_from_elsewhere``, which returns
    the time.monotonic() its push returned) and a waiting pull returning."""
    returned = []

    def waiter():
        task = queue.pull(timeout=30)
        returned.append((time.monotonic(), task))

    thread = threading.Thread(target=waiter)
    thread.start()
    time.sleep(0.15)  # the waiter is inside the library by now
    pushed = push_from_elsewhere()
    thread.join(30)
    [(when, task)] = returned
    assert task is not None
    task.finish()
    return when - pushed


def test_a_push_in_this_process_wakes_a_waiting_pull_at_once(queue):
    def push():
        queue.push({"late": True})
        return time.monotonic()

    latencies = [wake_latency(queue, push) for _ in range(5)]
    # Far below the 0.1 s slice: the library's wait ends on the push itself.
    assert statistics.median(latencies) < 0.05, latencies


PUSH_ONCE = """
import sys, time, tq
with tq.Queue(sys.argv[1]) as queue:
    queue.push({"from": "another process"})
    print(time.monotonic(), flush=True)
"""


def test_a_push_from_another_process_wakes_a_waiting_pull(queue, path):
    def push():
        child = run_python(PUSH_ONCE, path)
        assert child.returncode == 0, child.stderr
        return float(child.stdout)

    latency = wake_latency(queue, push)
    # The library looks for other processes' commits about every 20 ms.
    assert latency < 1.0, f"woken {latency:.3f} s after the push"


def test_a_waiting_pull_can_wait_without_a_bound(queue):
    pusher = threading.Timer(0.1, lambda: queue.push(1))
    pusher.start()
    task = queue.pull(timeout=float("inf"))
    pusher.join()
    assert task is not None
    task.finish()


def waiter_outcome(call):
    """Starts ``call`` on a thread; returns a function that joins it and
    gives (the exception or result, seconds from the call to its end)."""
    outcome = []

    def run():
        try:
            result = call()
        except BaseException as error:  # reported to the test
            result = error
        outcome.append((result, time.monotonic()))

    thread = threading.Thread(target=run)
    thread.start()

    def join(since):
        thread.join(10)
        assert not thread.is_alive()
        [(result, ended)] = outcome
        return result, ended - since

    return join


def test_close_wakes_a_pull_waiting_in_another_thread(queue):
    join = waiter_outcome(lambda: queue.pull(timeout=30))
    time.sleep(0.2)
    closed = time.monotonic()
    queue.close()
    error, waited = join(closed)
    assert isinstance(error, tq.ClosedError), error
    assert "is closed" in str(error)
    assert waited < 0.5


def test_close_wakes_pull_many_and_finish_and_pull_waiting_in_other_threads(queue):
    queue.push(1)
    task = queue.pull()
    joins = [
        waiter_outcome(lambda: queue.pull_many(10, timeout=30)),
        waiter_outcome(lambda: task.finish_and_pull(timeout=30)),
    ]
    time.sleep(0.2)
    closed = time.monotonic()
    queue.close()
    for join in joins:
        error, waited = join(closed)
        assert isinstance(error, tq.ClosedError), error
        assert waited < 0.5
    assert task.closed  # finished before the wait began


def test_interrupt_ends_waiting_pulls_now_and_later(queue):
    join = waiter_outcome(lambda: queue.pull(timeout=30))
    time.sleep(0.2)
    interrupted = time.monotonic()
    queue.interrupt()
    error, waited = join(interrupted)
    assert isinstance(error, tq.Interrupted) and error.status == -8, error
    assert waited < 0.5
    started = time.monotonic()
    with pytest.raises(tq.Interrupted, match="interrupted"):
        queue.pull(timeout=30)
    assert time.monotonic() - started < 0.5
    # Pulls still take ready tasks, and the queue works otherwise.
    pushed = queue.push(1)
    task = queue.pull(timeout=30)
    assert task.id == pushed
    task.finish()
    assert queue.pull() is None


def test_interrupt_leaves_other_handles_on_the_file_waiting(path):
    with tq.Queue(path) as interrupted, tq.Queue(path) as other:
        interrupted.interrupt()
        join = waiter_outcome(lambda: other.pull(timeout=30))
        time.sleep(0.2)
        pushed = time.monotonic()
        interrupted.push({"for": "other"})
        task, waited = join(pushed)
        assert isinstance(task, tq.Task) and task.payload == {"for": "other"}
        task.finish()


def test_a_triggered_cancel_ends_the_pulls_given_it_only(queue):
    cancel = tq.Cancel()
    join = waiter_outcome(lambda: queue.pull(timeout=30, cancel=cancel))
    time.sleep(0.2)
    triggered = time.monotonic()
    cancel.trigger()
    error, waited = join(triggered)
    assert isinstance(error, tq.Interrupted), error
    assert waited < 0.5
    # Triggering is permanent for that object; other pulls keep waiting.
    with pytest.raises(tq.Interrupted):
        queue.pull_many(5, timeout=30, cancel=cancel)
    started = time.monotonic()
    assert queue.pull(timeout=0.2) is None
    assert time.monotonic() - started >= 0.2
    # A cancelled pull still takes a task that is ready.
    queue.push(1)
    task = queue.pull(timeout=30, cancel=cancel)
    assert task is not None
    task.finish()


def test_cancel_must_be_a_tq_cancel(queue):
    with pytest.raises(TypeError, match="cancel must be a tq.Cancel"):
        queue.pull(timeout=1, cancel=threading.Event())
    queue.push(1)
    task = queue.pull()
    with pytest.raises(TypeError, match="cancel must be a tq.Cancel"):
        task.finish_and_pull(timeout=1, cancel="stop")
    assert not task.closed  # refused before finishing
    task.finish()
