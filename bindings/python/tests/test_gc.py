"""Garbage collection as the safety net: queues and tasks dropped without
close() are freed (the queue's files are closed), nothing crashes, and the
interpreter exits cleanly with objects still open."""

import gc
import os

from helpers import run_python

import tq


def open_descriptors(path) -> int:
    """How many of this process's file descriptors are on the queue's files."""
    names = {str(path), f"{path}-wal", f"{path}-shm"}
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            count += os.readlink(f"/proc/self/fd/{fd}") in names
        except FileNotFoundError:  # the descriptor listdir itself used
            pass
    return count


def test_a_dropped_queue_closes_its_files(path):
    queue = tq.Queue(path)
    queue.push(1)
    assert open_descriptors(path) > 0
    del queue
    gc.collect()
    assert open_descriptors(path) == 0


def test_a_queue_in_a_reference_cycle_is_closed_by_the_collector(path):
    gc.disable()
    try:
        holder = {"queue": tq.Queue(path)}
        holder["self"] = holder
        del holder
        assert open_descriptors(path) > 0  # only the cycle collector frees it
    finally:
        gc.enable()
    gc.collect()
    assert open_descriptors(path) == 0


def test_a_task_keeps_its_queue_open_until_it_is_dropped(path):
    queue = tq.Queue(path)
    queue.push(1)
    task = queue.pull()
    del queue
    gc.collect()
    assert open_descriptors(path) > 0
    task.finish()  # its queue is still usable through the task
    del task
    gc.collect()
    assert open_descriptors(path) == 0


def test_many_dropped_tasks_and_queues_do_not_crash(path):
    with tq.Queue(path, durability="normal") as queue:
        for n in range(2000):
            queue.push({"n": n})
        for _ in range(2000):
            task = queue.pull(lease=60)
            assert task is not None
            assert task.payload == {"n": task.id - 1}  # parsed, then dropped unfinished
        gc.collect()
        assert queue.counts() == {"pending": 0, "leased": 2000, "done": 0, "dead": 0, "cancelled": 0}
    for _ in range(50):
        tq.Queue(path)
    gc.collect()
    assert open_descriptors(path) == 0


EXIT_WITH_EVERYTHING_OPEN = """
import sys, threading, tq
queue = tq.Queue(sys.argv[1])
queue.push(1)
task = queue.pull()
other = tq.Queue(sys.argv[1])

def wait():
    try:
        other.pull(timeout=60)
    except tq.ClosedError:  # the exit may close the queue before the thread stops
        pass

# A daemon thread still waiting in a pull when the interpreter exits.
threading.Thread(target=wait, daemon=True).start()
print("exiting", flush=True)
"""


def test_the_interpreter_exits_cleanly_with_queues_tasks_and_waiters_left(path):
    result = run_python(EXIT_WITH_EVERYTHING_OPEN, path)
    assert (result.returncode, result.stdout, result.stderr) == (0, "exiting\n", "")
    with tq.Queue(path) as queue:
        assert queue.counts() == {"pending": 0, "leased": 1, "done": 0, "dead": 0, "cancelled": 0}
