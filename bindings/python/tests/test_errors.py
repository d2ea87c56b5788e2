"""Every error path: bad payloads, bad options, misuse of closed objects,
files that cannot hold a queue, a locked file. Each raises the exception of
its status with the library's message, and stores nothing."""

import math
import threading
import time

import pytest
from helpers import hold_write_lock

import tq


@pytest.mark.parametrize(
    "text, match",
    [
        (b"", "EOF while parsing"),
        (b"{", "EOF while parsing"),
        (b"[1] [2]", "trailing characters"),
        (b"\xef\xbb\xbf{}", "expected value"),  # a byte-order mark
        (b"{'single': 'quotes'}", "key must be a string"),
        ("hello", "expected ident|expected value"),
        (float("nan"), "expected value"),  # json.dumps writes NaN, which is not JSON
        (float("inf"), "expected value"),
    ],
)
def test_invalid_json_is_refused_and_nothing_is_stored(queue, text, match):
    with pytest.raises(tq.InvalidJSONError, match=match) as caught:
        queue.push(text)
    assert caught.value.status == -2 and isinstance(caught.value, tq.Error)
    assert caught.value.message == str(caught.value)
    assert queue.count() == 0


@pytest.mark.parametrize("payload", [b"\xff\xfe", '"\ud800"', ["\udfff"]])
def test_text_that_is_not_utf8_is_refused(queue, payload):
    with pytest.raises(tq.InvalidArgumentError, match="not valid UTF-8") as caught:
        queue.push(payload)
    assert caught.value.status == -1
    assert queue.count() == 0


def test_objects_json_cannot_serialize_raise_type_error(queue):
    with pytest.raises(TypeError):
        queue.push({"a set": {1, 2}})
    assert queue.count() == 0


def test_a_payload_over_the_queues_limit_is_refused(path):
    with tq.Queue(path, max_payload_len=10) as queue:
        queue.push(b"[1,2,3,4]")
        with pytest.raises(
            tq.InvalidArgumentError, match="the payload is 11 bytes; this queue's limit is 10"
        ):
            queue.push(b"[1,2,3,4,5]")
        assert queue.count() == 1


# --- Use after close -------------------------------------------------------

CALLS_ON_A_QUEUE = {
    "push": lambda queue: queue.push(1),
    "push with delay": lambda queue: queue.push(1, delay=1),
    "pull": lambda queue: queue.pull(),
    "pull with lease": lambda queue: queue.pull(lease=1),
    "pull with timeout": lambda queue: queue.pull(timeout=1),
    "push with options": lambda queue: queue.push(1, priority=1, unique_key="k"),
    "push_unique": lambda queue: queue.push_unique(1, "k"),
    "push_many": lambda queue: queue.push_many([1, 2]),
    "pull_many": lambda queue: queue.pull_many(2),
    "pull_many with timeout": lambda queue: queue.pull_many(2, timeout=1),
    "finish_many": lambda queue: queue.finish_many([]),
    "interrupt": lambda queue: queue.interrupt(),
    "recover": lambda queue: queue.recover(),
    "count": lambda queue: queue.count(),
    "counts": lambda queue: queue.counts(),
    "oldest_ready_age": lambda queue: queue.oldest_ready_age(),
    "list": lambda queue: queue.list(),
    "iter_tasks": lambda queue: next(queue.iter_tasks()),
    "retry_dead": lambda queue: queue.retry_dead(1),
    "retry_all_dead": lambda queue: queue.retry_all_dead(),
    "purge": lambda queue: queue.purge(),
    "purge dead": lambda queue: queue.purge(state="dead"),
    "checkpoint": lambda queue: queue.checkpoint(),
    "wal_size": lambda queue: queue.wal_size(),
}


@pytest.mark.parametrize("call", CALLS_ON_A_QUEUE.values(), ids=CALLS_ON_A_QUEUE.keys())
def test_every_call_on_a_closed_queue_raises_closed_error(path, call):
    queue = tq.Queue(path)
    queue.close()
    assert queue.closed
    with pytest.raises(tq.ClosedError, match="is closed") as caught:
        call(queue)
    assert isinstance(caught.value, tq.InvalidArgumentError) and caught.value.status == -1


def test_close_is_idempotent_and_with_closes(path):
    with tq.Queue(path) as queue:
        pass
    assert queue.closed
    queue.close()
    queue.close()


CALLS_ON_A_TASK = {
    "finish": lambda task: task.finish(),
    "fail": lambda task: task.fail("reason"),
    "extend": lambda task: task.extend(30),
    "finish_and_pull": lambda task: task.finish_and_pull(),
    "finish_and_pull with timeout": lambda task: task.finish_and_pull(timeout=1),
}


@pytest.mark.parametrize("call", CALLS_ON_A_TASK.values(), ids=CALLS_ON_A_TASK.keys())
def test_a_task_cannot_be_finished_once_its_queue_is_closed(path, call):
    with tq.Queue(path) as queue:
        queue.push(1)
        task = queue.pull()
    with pytest.raises(tq.ClosedError):
        call(task)
    assert not task.closed
    assert task.priority == 0  # its fields are still there
    task.close()
    # The task was never finished: another handle sees it leased.
    with tq.Queue(path) as queue:
        assert queue.count("leased") == 1


def test_a_task_finished_twice_raises_not_held(queue):
    queue.push(1)
    task = queue.pull()
    task.finish()
    with pytest.raises(tq.NotHeldError, match="already finished") as caught:
        task.finish()
    assert caught.value.status == -3


@pytest.mark.parametrize("call", CALLS_ON_A_TASK.values(), ids=CALLS_ON_A_TASK.keys())
def test_a_closed_task_cannot_be_finished(queue, call):
    queue.push(1)
    task = queue.pull()
    task.close()
    with pytest.raises(tq.ClosedError, match=f"task {task.id} is closed"):
        call(task)
    assert queue.count("leased") == 1


@pytest.mark.parametrize("call", CALLS_ON_A_TASK.values(), ids=CALLS_ON_A_TASK.keys())
@pytest.mark.parametrize("ended_by", ["finished", "failed"])
def test_a_delivery_that_ended_raises_not_held(path, call, ended_by):
    with tq.Queue(path, retry_backoff=(60, 60)) as queue:
        queue.push(1)
        task = queue.pull()
        task.finish() if ended_by == "finished" else task.fail()
        with pytest.raises(tq.NotHeldError, match=f"task {task.id} was already {ended_by}"):
            call(task)
        assert queue.count("leased") == 0


def test_finishing_a_delivery_taken_by_another_worker_raises_the_librarys_not_held(queue):
    queue.push(1)
    lost = queue.pull(lease=0.01)
    time.sleep(0.05)
    current = queue.pull()
    with pytest.raises(tq.NotHeldError) as caught:
        lost.finish()
    assert caught.value.message  # the library's explanation
    assert lost.closed
    with pytest.raises(tq.NotHeldError, match=f"task {lost.id}"):
        lost.finish()  # the delivery stays ended
    current.finish()


def test_close_from_another_thread_ends_a_waiting_pull(queue):
    outcome = []

    def wait():
        started = time.monotonic()
        try:
            queue.pull(timeout=30)
        except tq.Error as error:
            outcome.append((error, time.monotonic() - started))

    waiter = threading.Thread(target=wait)
    waiter.start()
    time.sleep(0.2)
    queue.close()
    waiter.join(10)
    assert not waiter.is_alive()
    [(error, waited)] = outcome
    assert isinstance(error, tq.ClosedError)
    assert waited < 2


# --- Bad options -----------------------------------------------------------


@pytest.mark.parametrize(
    "options, error, match",
    [
        ({"durability": 7}, tq.InvalidArgumentError, "unknown durability 7"),
        ({"durability": "fast"}, tq.InvalidArgumentError, "unknown durability 'fast'"),
        ({"durability": 1.5}, TypeError, "durability must be"),
        ({"busy_timeout": -1}, tq.InvalidArgumentError, "busy_timeout must be at least 0"),
        ({"busy_timeout": math.nan}, tq.InvalidArgumentError, "busy_timeout must be at least 0"),
        ({"busy_timeout": 400 * 86400}, tq.InvalidArgumentError, "busy timeout must be between"),
        ({"busy_timeout": math.inf}, tq.InvalidArgumentError, "busy timeout must be between"),
        ({"busy_timeout": "5"}, TypeError, "busy_timeout must be a number"),
        ({"max_payload_len": 0}, tq.InvalidArgumentError, "payload limit must be between"),
        ({"max_payload_len": 10**12}, tq.InvalidArgumentError, "payload limit must be between"),
        ({"max_payload_len": -1}, tq.InvalidArgumentError, "max_payload_len must be"),
        ({"max_payload_len": 1.5}, tq.InvalidArgumentError, "max_payload_len must be"),
    ],
)
def test_bad_open_options_are_refused_and_create_no_file(path, options, error, match):
    with pytest.raises(error, match=match):
        tq.Queue(path, **options)
    assert not path.exists()


@pytest.mark.parametrize(
    "options, error, match",
    [
        ({"queue": ""}, tq.InvalidArgumentError, "queue name must be 1 to 128 bytes"),
        ({"queue": "q" * 129}, tq.InvalidArgumentError, "queue name must be 1 to 128 bytes"),
        ({"queue": "a\0b"}, tq.InvalidArgumentError, "contains a NUL character"),
        ({"queue": "\udc80"}, tq.InvalidArgumentError, "not valid UTF-8"),
        ({"queue": b"emails"}, TypeError, "queue must be a str"),
        ({"max_attempts": 0}, tq.InvalidArgumentError, "max attempts must be at least 1"),
        ({"max_attempts": -1}, tq.InvalidArgumentError, "max_attempts must be between 0 and 4294967295"),
        ({"max_attempts": 2**32}, tq.InvalidArgumentError, "max_attempts must be between"),
        ({"max_attempts": 2.0}, TypeError, "max_attempts must be an integer"),
        ({"retry_backoff": (10, 1)}, tq.InvalidArgumentError, "longest retry pause .* is shorter"),
        ({"retry_backoff": (1, 400 * 86400)}, tq.InvalidArgumentError, "retry pause must be between"),
        ({"retry_backoff": (-1, 1)}, tq.InvalidArgumentError, "retry_backoff must be at least 0"),
        ({"retry_backoff": (1,)}, TypeError, "retry_backoff must be a pair"),
        ({"retry_backoff": 5}, TypeError, "retry_backoff must be a pair"),
        ({"retry_backoff": ("1", "2")}, TypeError, "retry_backoff must be a number"),
    ],
)
def test_bad_job_options_are_refused_and_create_no_file(path, options, error, match):
    with pytest.raises(error, match=match):
        tq.Queue(path, **options)
    assert not path.exists()


def test_an_unknown_option_is_a_type_error(path):
    with pytest.raises(TypeError):
        tq.Queue(path, lease=5)


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"lease": 0}, tq.InvalidArgumentError, "lease must be between 1 ms"),
        ({"lease": 400 * 86400}, tq.InvalidArgumentError, "lease must be between 1 ms"),
        ({"lease": -1}, tq.InvalidArgumentError, "lease must be at least 0"),
        ({"lease": math.nan}, tq.InvalidArgumentError, "lease must be at least 0"),
        ({"lease": "30"}, TypeError, "lease must be a number"),
        ({"timeout": -0.5}, tq.InvalidArgumentError, "timeout must be at least 0"),
        ({"timeout": True}, TypeError, "timeout must be a number"),
    ],
)
def test_bad_pull_options_are_refused(queue, kwargs, error, match):
    queue.push(1)
    with pytest.raises(error, match=match):
        queue.pull(**kwargs)
    assert queue.count("pending") == 1


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"delay": -1}, tq.InvalidArgumentError, "delay must be at least 0"),
        ({"delay": 400 * 86400}, tq.InvalidArgumentError, "delay must be between 0 ms"),
        ({"run_at": -5}, tq.InvalidArgumentError, "run-at time must not be before 1970"),
        ({"run_at": math.nan}, tq.InvalidArgumentError, "run_at must be a time"),
        ({"run_at": "tomorrow"}, TypeError, "run_at must be a datetime"),
        ({"delay": 1, "run_at": 1}, tq.InvalidArgumentError, "delay or run_at, not both"),
        ({"priority": 2**31}, tq.InvalidArgumentError, "priority must be between -2147483648 and 2147483647"),
        ({"priority": -(2**31) - 1}, tq.InvalidArgumentError, "priority must be between"),
        ({"priority": "high"}, TypeError, "priority must be an integer"),
        ({"priority": True}, TypeError, "priority must be an integer"),
        ({"max_attempts": 0}, tq.InvalidArgumentError, "max attempts must be at least 1"),
        ({"unique_key": ""}, tq.InvalidArgumentError, "unique key must be 1 to 1024 bytes"),
        ({"unique_key": "k" * 1025}, tq.InvalidArgumentError, "unique key must be 1 to 1024 bytes"),
        ({"unique_key": 1042}, TypeError, "unique_key must be a str"),
        ({"unique_key": "a\0b"}, tq.InvalidArgumentError, "contains a NUL character"),
        ({"unique_key": "\udc80"}, tq.InvalidArgumentError, "not valid UTF-8"),
        ({"unique_for": 60}, tq.InvalidArgumentError, "a unique window needs a unique key"),
        ({"unique_key": "k", "unique_for": -1}, tq.InvalidArgumentError, "unique_for must be at least 0"),
        ({"unique_key": "k", "unique_for": 400 * 86400}, tq.InvalidArgumentError, "between 0 ms"),
    ],
)
def test_bad_push_options_are_refused_and_nothing_is_stored(queue, kwargs, error, match):
    with pytest.raises(error, match=match):
        queue.push(1, **kwargs)
    assert queue.count() == 0


def test_bad_count_and_purge_arguments(queue):
    with pytest.raises(
        tq.InvalidArgumentError, match="unknown state 'gone'; expected one of pending, leased, done, dead"
    ):
        queue.count("gone")
    with pytest.raises(tq.InvalidArgumentError, match="unknown task state 9"):
        queue.count(9)
    with pytest.raises(TypeError, match="state must be a tq.State or its name"):
        queue.count(None)
    with pytest.raises(tq.InvalidArgumentError, match="older_than must be at least 0"):
        queue.purge(-1)
    with pytest.raises(tq.InvalidArgumentError, match="age out of range"):
        queue.purge(1e17)  # seconds: past INT64_MAX milliseconds
    for state in ("pending", "leased"):
        with pytest.raises(tq.InvalidArgumentError) as caught:
            queue.purge(state=state)
        assert caught.value.message  # the library's: only done or dead tasks are purged


@pytest.mark.parametrize(
    "call, error, match",
    [
        (lambda queue: queue.list(limit=-1), tq.InvalidArgumentError, "limit must be between 0"),
        (lambda queue: queue.list(after_id="5"), TypeError, "after_id must be an integer"),
        (lambda queue: queue.list("gone"), tq.InvalidArgumentError, "unknown state 'gone'"),
        (lambda queue: queue.list(9), tq.InvalidArgumentError, "unknown task state 9"),
        (lambda queue: queue.iter_tasks(page_size=2.5), TypeError, "page_size must be an integer"),
        (lambda queue: queue.retry_dead("1"), TypeError, "task_id must be an integer"),
        (lambda queue: queue.retry_dead(2**63), tq.InvalidArgumentError, "task_id must be between"),
        (lambda queue: queue.push_unique(1, None), TypeError, "unique_key must be a str"),
    ],
)
def test_bad_arguments_of_the_backlog_calls(queue, call, error, match):
    with pytest.raises(error, match=match):
        call(queue)


@pytest.mark.parametrize(
    "call, error, match",
    [
        (lambda task: task.extend(0), tq.InvalidArgumentError, "lease must be between 1 ms"),
        (lambda task: task.extend(-1), tq.InvalidArgumentError, "lease must be at least 0"),
        (lambda task: task.extend(None), TypeError, "lease must be a number"),
        (lambda task: task.fail(b"bytes"), TypeError, "reason must be a str or an exception"),
        (
            lambda task: task.finish_and_pull(timeout=-1),
            tq.InvalidArgumentError,
            "timeout must be at least 0",
        ),
        (lambda task: task.finish_and_pull(lease=0), tq.InvalidArgumentError, "lease must be between 1 ms"),
    ],
)
def test_bad_arguments_of_task_calls_leave_the_delivery_held(queue, call, error, match):
    queue.push(1)
    task = queue.pull()
    with pytest.raises(error, match=match):
        call(task)
    assert not task.closed
    assert queue.count("leased") == 1
    task.finish()


# --- Files that cannot hold a queue ----------------------------------------


def test_a_missing_directory_is_an_io_error(tmp_path):
    with pytest.raises(tq.IoError, match="cannot open") as caught:
        tq.Queue(tmp_path / "missing" / "queue.db")
    assert caught.value.status == -5


def test_a_directory_is_an_io_error(tmp_path):
    with pytest.raises(tq.IoError):
        tq.Queue(tmp_path)


def test_a_file_that_is_not_a_database_is_refused_and_left_untouched(tmp_path):
    path = tmp_path / "notes.txt"
    content = b"these are not the pages you are looking for\n" * 200
    path.write_bytes(content)
    with pytest.raises(tq.NotADatabaseError, match="not a database") as caught:
        tq.Queue(path)
    assert caught.value.status == -6
    assert path.read_bytes() == content


@pytest.mark.parametrize(
    "path, match",
    [
        (":memory:", "in-memory or temporary database"),
        ("", "the path is empty"),
        (b"/tmp/\xff.db", "path is not valid UTF-8"),
        ("queue\0.db", "contains a NUL byte"),
    ],
)
def test_paths_that_cannot_name_a_queue_are_invalid_arguments(path, match):
    with pytest.raises(tq.InvalidArgumentError, match=match):
        tq.Queue(path)


# --- Busy ------------------------------------------------------------------

def test_a_file_locked_past_the_busy_timeout_raises_busy(path):
    tq.Queue(path).close()  # create the queue's file and tables
    # Another process (with its own SQLite) holds the write lock.
    holder = hold_write_lock(path)
    try:
        with tq.Queue(path, busy_timeout=0.05) as queue:
            started = time.monotonic()
            with pytest.raises(tq.BusyError) as caught:
                queue.push(1)
            assert caught.value.status == -4
            assert time.monotonic() - started < 5
            holder.stdin.write("\n")
            holder.stdin.flush()
            assert holder.wait(10) == 0
            queue.push(1)  # the lock is gone: the push goes through
            assert queue.count() == 1
    finally:
        holder.kill()
        holder.wait()


# --- The exception hierarchy -----------------------------------------------


def test_each_status_has_its_own_subclass_of_error():
    classes = [
        tq.InvalidArgumentError,
        tq.InvalidJSONError,
        tq.NotHeldError,
        tq.BusyError,
        tq.IoError,
        tq.NotADatabaseError,
        tq.InternalError,
        tq.Interrupted,
    ]
    assert [cls.status for cls in classes] == [-1, -2, -3, -4, -5, -6, -7, -8]
    assert not issubclass(tq.Interrupted, InterruptedError)  # Python's, for EINTR
    assert all(issubclass(cls, tq.Error) for cls in classes)
    assert issubclass(tq.ClosedError, tq.InvalidArgumentError)


def test_a_status_unknown_to_the_binding_gives_a_plain_error_carrying_it():
    error = tq.errors.from_status(-99, "from a newer library")
    assert type(error) is tq.Error
    assert (error.status, error.message) == (-99, "from a newer library")
