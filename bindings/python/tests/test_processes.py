"""Several processes on one file: multiprocessing with the spawn method,
exactly-once delivery across processes, recovery of a dead holder's task,
a task that kills every worker ending dead, and a handle used after fork()."""

import multiprocessing
import pickle
import queue as stdlib_queue

import pytest
from helpers import consume_until_stopped, run_python

import tq

TASKS = 600
CONSUMERS = 2


def test_spawned_consumers_finish_every_task_exactly_once(path):
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    with tq.Queue(path) as queue:
        consumers = [
            context.Process(target=consume_until_stopped, args=(str(path), results)) for _ in range(CONSUMERS)
        ]
        for consumer in consumers:
            consumer.start()
        assert [results.get(timeout=60) for _ in consumers] == [("ready", None)] * CONSUMERS
        # Pushed while the consumers are pulling.
        pushed = {queue.push({"n": n}): n for n in range(TASKS)}
        for _ in consumers:
            queue.push({"stop": True})
        reports = []
        for _ in consumers:
            try:
                reports.append(results.get(timeout=60))
            except stdlib_queue.Empty:
                pytest.fail("a consumer process did not report")
        for consumer in consumers:
            consumer.join(30)
            assert consumer.exitcode == 0
        assert [status for status, _ in reports] == ["ok"] * CONSUMERS
        finished = [item for _, done in reports for item in done]
        assert sorted(finished) == sorted(pushed.items())  # each (id, n) once
        assert queue.counts() == {"pending": 0, "leased": 0, "done": 0, "dead": 0, "cancelled": 0}


DIE_HOLDING_A_TASK = """
import os, sys, tq
queue = tq.Queue(sys.argv[1])
task = queue.pull(lease=3600)
print(task.id, flush=True)
os._exit(0)  # no finish, no close: as a crash
"""


def test_recover_takes_back_the_task_of_a_dead_process(path):
    with tq.Queue(path) as queue:
        pushed = queue.push({"job": 1})
        child = run_python(DIE_HOLDING_A_TASK, path)
        assert child.returncode == 0, child.stderr
        assert int(child.stdout) == pushed
        assert queue.counts() == {"pending": 0, "leased": 1, "done": 0, "dead": 0, "cancelled": 0}
        assert queue.pull() is None  # its lease has an hour to run
        assert queue.recover() == 1
        task = queue.pull()
        assert (task.id, task.attempts) == (pushed, 2)
        task.finish()


def test_a_task_that_crashes_every_worker_ends_dead(path):
    with tq.Queue(path, max_attempts=2, retry_backoff=(0, 0)) as queue:
        pushed = queue.push({"poison": True})
        for _ in range(2):  # two deliveries, two crashes
            child = run_python(DIE_HOLDING_A_TASK, path)
            assert child.returncode == 0, child.stderr
            assert int(child.stdout) == pushed
            assert queue.recover() == 1
        assert queue.pull() is None
        assert queue.counts() == {"pending": 0, "leased": 0, "done": 0, "dead": 1, "cancelled": 0}
        [dead] = queue.list("dead")
        assert (dead.id, dead.attempts) == (pushed, 2)
        assert dead.last_error  # the library's words for a holder that died
        queue.retry_dead(pushed)
        task = queue.pull()
        assert (task.id, task.attempts, task.last_error) == (pushed, 1, dead.last_error)
        task.finish()


USE_AFTER_FORK = """
import os, sys, tq
queue = tq.Queue(sys.argv[1])
queue.push({"from": "parent"})
pid = os.fork()
if pid == 0:
    try:
        queue.push({"from": "child, inherited handle"})
        print("no error", flush=True)
    except tq.InvalidArgumentError as error:
        print("refused:", error, flush=True)
    with tq.Queue(sys.argv[1]) as own:
        own.push({"from": "child, own handle"})
    os._exit(0)
_, status = os.waitpid(pid, 0)
assert os.waitstatus_to_exitcode(status) == 0
queue.push({"from": "parent after the child"})
print([queue.pull().payload["from"] for _ in range(queue.count())], flush=True)
"""


def test_a_handle_used_in_a_forked_child_is_refused_clearly(path):
    result = run_python(USE_AFTER_FORK, path)
    assert result.returncode == 0, result.stderr
    refusal, order = result.stdout.splitlines()
    assert refusal.startswith("refused: this handle was opened by process ")
    assert "after fork, open a new handle in the child" in refusal
    assert order == "['parent', 'child, own handle', 'parent after the child']"


def test_queues_and_tasks_cannot_be_pickled(queue):
    queue.push(1)
    task = queue.pull()
    with pytest.raises(TypeError, match="send its path"):
        pickle.dumps(queue)
    with pytest.raises(TypeError, match="finish it in the process that pulled it"):
        pickle.dumps(task)
    task.finish()
