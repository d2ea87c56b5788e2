"""``Task``, one delivery of a task, and ``TaskSnapshot``, a task as read:
their fields, copied out of the library, and what a holder does with a
delivery (finish, fail, extend, snooze, finish and pull, watch)."""

import ctypes
import datetime
import enum
import json
import threading
from ctypes import byref, c_size_t, c_void_p
from typing import TYPE_CHECKING, NamedTuple

from . import errors
from ._limits import EMPTY, OK, SUSPENDED, TIMEOUT, _check
from ._native import TASK_P, lib
from .options import _PULL_OPTIONS, _json_text, _milliseconds, _reason, _seconds, _unix_ms
from .watch import Cancel, CancellationWatch

if TYPE_CHECKING:
    from .queue import Queue

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


class State(enum.IntEnum):
    """The states of a task (``tq_state``), for ``count``, ``list`` and ``purge``."""

    #: Waiting to be claimed (possibly not yet due).
    PENDING = 0
    #: Claimed under a lease (possibly expired and not yet taken back).
    LEASED = 1
    #: Finished and kept as history (queues opened with ``keep_history``).
    DONE = 2
    #: Used up its attempts; kept with its last failure reason until retried
    #: (``retry_dead``) or purged.
    DEAD = 3
    #: Cancelled (``Queue.cancel_task``); kept with its reason on queues
    #: opened with ``keep_history``, until purged.
    CANCELLED = 4


_NOT_PARSED = object()


def _read_fields(ptr) -> tuple:
    """A task's priority, maximum attempts, run-at time (ms since the
    epoch), last error (str or None) and state, read from the library."""
    last_error = lib.tq_task_last_error(ptr)
    return (
        lib.tq_task_priority(ptr),
        lib.tq_task_max_attempts(ptr),
        lib.tq_task_run_at_unix_ms(ptr),
        None if last_error is None else last_error.decode("utf-8", "replace"),
        lib.tq_task_state(ptr),
        _read_ids(lib.tq_task_parents, ptr),
        _read_ids(lib.tq_task_waiting_for, ptr),
        lib.tq_task_group(ptr),
        lib.tq_task_expires_at_unix_ms(ptr),
        lib.tq_task_deadline_unix_ms(ptr),
    )


def _read_ids(accessor, ptr) -> tuple:
    """The ids a task's ``accessor`` (tq_task_parents, tq_task_waiting_for) lists."""
    count = c_size_t()
    ids = accessor(ptr, byref(count))
    return tuple(ids[: count.value]) if ids else ()


class _TaskFields:
    """The fields a pulled task and a listed snapshot share, all read-only."""

    __slots__ = ("_id", "_attempts", "_raw", "_payload", "_fields")

    def _copy(self, ptr) -> None:
        length = c_size_t()
        data = lib.tq_task_payload(ptr, byref(length))
        self._raw = ctypes.string_at(data, length.value)
        self._id = lib.tq_task_id(ptr)
        self._attempts = lib.tq_task_attempts(ptr)
        self._payload = _NOT_PARSED

    def _details(self) -> tuple:
        return self._fields

    @property
    def id(self) -> int:
        """The id ``push`` returned."""
        return self._id

    @property
    def attempts(self) -> int:
        """How many times the task was claimed, this delivery included (1 on
        the first delivery)."""
        return self._attempts

    @property
    def raw(self) -> bytes:
        """The payload's JSON text, exactly as pushed."""
        return self._raw

    @property
    def payload(self):
        """The payload parsed from JSON (on first use; ``json.loads``)."""
        if self._payload is _NOT_PARSED:
            self._payload = json.loads(self._raw)
        return self._payload

    @property
    def priority(self) -> int:
        """The task's priority (0 unless pushed with one)."""
        return self._details()[0]

    @property
    def max_attempts(self) -> int:
        """How many deliveries the task gets before a failure makes it dead."""
        return self._details()[1]

    @property
    def run_at(self) -> datetime.datetime:
        """When the task became (or becomes) ready: a timezone-aware
        ``datetime`` in UTC, to the millisecond."""
        return _EPOCH + datetime.timedelta(milliseconds=self._details()[2])

    @property
    def expires_at(self) -> "datetime.datetime | None":
        """For a snapshot, when its first delivery may no longer start
        (``push(expire_after=...)``): a timezone-aware ``datetime`` in
        UTC, or None when it has none. None for a pulled task."""
        at = self._details()[8]
        return None if at == 0 else _EPOCH + datetime.timedelta(milliseconds=at)

    @property
    def deadline(self) -> "datetime.datetime | None":
        """For a snapshot, when no delivery may start any more
        (``push(deadline_after=...)``), or None when it has none. None for
        a pulled task."""
        at = self._details()[9]
        return None if at == 0 else _EPOCH + datetime.timedelta(milliseconds=at)

    @property
    def last_error(self) -> "str | None":
        """Why the task's previous delivery ended (the reason given to
        ``fail``, or the library's words for a lost lease or a dead holder),
        or None when no delivery ended that way."""
        return self._details()[3]

    @property
    def state(self) -> State:
        """The task's state when it was pulled (``State.LEASED``) or listed."""
        return State(self._details()[4])

    @property
    def parents(self) -> "tuple[int, ...]":
        """For a pulled task, the ids of the tasks it was pushed to wait for
        (``after``), ascending: each has ended. Empty for a snapshot."""
        return self._details()[5]

    @property
    def waiting_for(self) -> "tuple[int, ...]":
        """For a snapshot, the ids of the tasks it still waits for,
        ascending: empty unless it is pending and blocked. Empty for a
        pulled task."""
        return self._details()[6]

    @property
    def group(self) -> "str | None":
        """For a snapshot, the ordered group it was pushed to (``group``),
        or None. None for a pulled task."""
        group = self._details()[7]
        return None if group is None else group.decode("utf-8")


class Task(_TaskFields):
    """One delivery of a task, as returned by ``Queue.pull``.

    Read ``id``, ``token``, ``attempts``, ``payload`` (``raw`` for the JSON
    text), ``priority``, ``max_attempts``, ``run_at``, ``last_error`` and
    ``state``; end the delivery with ``finish()``, ``fail(reason)`` or
    ``finish_and_pull()``, and keep the lease of a long task with
    ``extend(seconds)``. ``close()`` (or leaving a ``with`` block) frees it
    without finishing it, as does garbage collection: the task is then
    claimed again when its lease runs out or its holder is recovered.
    """

    __slots__ = ("_queue", "_ptr", "_token", "_lock", "_ended", "_watch", "__weakref__")

    # Tasks come by the thousand, so the library's task is freed by __del__
    # rather than by a weakref.finalize object per task. A class attribute
    # stays reachable while the interpreter shuts down.
    _free_task = lib.tq_task_free

    def __init__(self, queue: "Queue", ptr):
        """Takes ownership of ``ptr`` (from ``tq_pull``); not for direct use."""
        self._ptr = ptr
        self._queue = queue
        self._lock = threading.Lock()
        self._ended = None
        self._watch = None
        self._fields = None
        self._copy(ptr)
        self._token = lib.tq_task_token(ptr)

    @staticmethod
    def _adopt_all(queue: "Queue", pointers) -> "list[Task]":
        """Tasks owning ``pointers``; if making one fails, the pointers not
        yet owned by a task are freed."""
        tasks = []
        try:
            for pointer in pointers:
                tasks.append(Task(queue, pointer))
        except BaseException:
            # The task being made when it failed owns its pointer already.
            for pointer in pointers[len(tasks) + 1 :]:
                lib.tq_task_free(pointer)
            raise
        return tasks

    def _details(self) -> tuple:
        if self._fields is None:
            with self._lock:
                if self._fields is None:
                    self._fields = _read_fields(self._ptr)
        return self._fields

    @property
    def token(self) -> int:
        """The token of this delivery: with ``id``, it finishes the task in
        SQL, ``SELECT tq_finish(id, token)`` through tq's SQLite extension
        (``tq.sqlite.load``), in the same commit as the worker's own
        writes."""
        return self._token

    def finish(self, result=None) -> None:
        """Completes this delivery: the task is deleted, or kept as done on a
        queue opened with ``keep_history``. Succeeds as long as no other worker
        took the task since it was pulled, even past its lease.

        ``result``, when not None, is kept with the task for any process to
        read (``Queue.task``) or wait for (``Queue.wait``): on a queue
        without ``keep_history`` for its ``result_retention``, with it as
        long as the done task. It is taken as ``Queue.push`` takes a payload
        (``bytes`` and ``str`` as JSON text; ``"null"`` for JSON null), at
        most the payload limit; ``InvalidJSONError`` or
        ``InvalidArgumentError`` for a bad one changes nothing: the task is
        still held.

        Raises ``NotHeldError`` when the delivery is no longer current (the
        task was already finished or failed, recovered, or taken by another
        worker), ``CancelledError`` when the task was cancelled meanwhile (it
        ends as cancelled, not done), ``ClosedError`` after ``close()`` of the task or its queue,
        ``BusyError`` or ``IoError`` (the delivery is then still held and
        ``finish()`` may be tried again).
        """
        if result is None:
            self._settle(lambda queue, ptr: lib.tq_finish(queue, ptr), "finished")
            return
        text = _json_text("result", result)
        self._settle(lambda queue, ptr: lib.tq_finish_with_result(queue, ptr, text), "finished")

    def fail(self, reason=None) -> None:
        """Ends this delivery as failed, keeping ``reason`` (a ``str``, an
        exception, written as "Type: message", or None) as the task's
        ``last_error``: the task is pending again after the queue's retry
        back-off, or dead when this delivery was its last attempt. A reason
        over ``tq.MAX_REASON_LEN`` bytes is cut. Raises as ``finish`` does."""
        text = _reason(reason)
        self._settle(lambda queue, ptr: lib.tq_fail(queue, ptr, text), "failed")

    def extend(self, lease, progress=None) -> None:
        """Renews the lease: it now expires ``lease`` seconds (or a
        ``timedelta``) from now. Call it regularly while working on a long
        task. Raises ``NotHeldError`` when the lease was lost (stop working
        on the task: another worker may have it), and as ``finish`` does.

        ``progress``, when not None, is recorded with the task for anyone to
        read (``Queue.task``) until the next progress replaces it, a later
        delivery's included; taken and refused as ``finish`` takes a
        ``result``."""
        lease_ms = _milliseconds("lease", lease)
        if progress is None:
            self._settle(lambda queue, ptr: lib.tq_extend(queue, ptr, lease_ms), None)
            return
        text = _json_text("progress", progress)
        self._settle(lambda queue, ptr: lib.tq_extend_with_progress(queue, ptr, lease_ms, text), None)

    def step(self, name: str, fn=None):
        """Runs step ``name`` of this task once across its deliveries.

        ``task.step("charge", fn)`` returns the output an earlier delivery
        recorded, without calling ``fn``; otherwise calls ``fn()`` and
        records what it returns (taken as ``finish`` takes a ``result``: a
        ``str`` or ``bytes`` is JSON text) with the task in one commit
        before returning it, parsed. An exception from ``fn`` records
        nothing: the step runs again next time.

        ``with task.step("charge") as step:`` does the same around a block:
        ``step.done`` says whether an earlier delivery recorded it (then
        ``step.output`` is its output: skip the work); otherwise set
        ``step.output``, recorded when the block ends without an exception.

        The first output recorded is kept: a second one is not stored.
        Raises ``NotHeldError`` when the delivery is no longer current (and
        records nothing), ``InvalidJSONError`` for an output that is not
        JSON, and as ``finish`` does."""
        if fn is None:
            return Step(self, name)
        recorded = self._step_get(name)
        if recorded is not None:
            return json.loads(recorded)
        text = _json_text("step's output", fn())
        if not self._step_put(name, text):
            text = self._step_get(name)
        return json.loads(text)

    def _step_get(self, name: str) -> "bytes | None":
        """The JSON text recorded for step ``name``, or None."""
        encoded = _step_name(name)
        out = c_void_p()
        with self._lock:
            ptr = self._live()
            with self._queue._handle as queue:
                status = _check(lib.tq_step_get(queue, ptr, encoded, byref(out)))
        if status == EMPTY:
            return None
        try:
            return ctypes.string_at(out.value)
        finally:
            lib.tq_string_free(out)

    def _step_put(self, name: str, text: bytes) -> bool:
        """Records step ``name``: False when it was already recorded."""
        encoded = _step_name(name)
        status = self._settle(lambda queue, ptr: lib.tq_step_put(queue, ptr, encoded, text), None)
        return status == OK

    def wait_for(self, key: str, timeout):
        """Waits up to ``timeout`` seconds (or a ``timedelta``) for an event
        under ``key`` (``Queue.signal``), and returns its payload, parsed.

        An event kept under ``key`` is taken at once and the task stays
        held. Otherwise the task is handed back to wait, spending no attempt
        and keeping its steps, and ``Suspended`` is raised: let it leave the
        handler. The next delivery, once an event came or the timeout
        passed, runs the handler again, and the same call returns the
        event's payload or raises ``EventTimeout``; every later call for
        ``key`` gives the same answer, so the handler reads the same at
        every delivery::

            paid = task.wait_for("payment:42", timeout=3600)

        A ``timeout`` of 0 never suspends. Raises as ``finish`` does."""
        encoded = _event_key(key)
        timeout_ms = _milliseconds("timeout", timeout)
        out = c_void_p()
        status = self._settle(
            lambda queue, ptr: lib.tq_wait_for_event(queue, ptr, encoded, timeout_ms, byref(out)), None
        )
        if status == TIMEOUT:
            raise errors.EventTimeout(f"the wait of task {self.id} for an event under {key!r} timed out")
        if status == SUSPENDED:
            self._end_suspended()
        try:
            return json.loads(ctypes.string_at(out.value))
        finally:
            lib.tq_string_free(out)

    def sleep(self, name: str, duration) -> None:
        """Sleeps the task for ``duration`` seconds (or a ``timedelta``) from
        the first call of the sleep named ``name``, as ``sleep_until``
        does."""
        encoded = _event_key(name, "sleep name")
        duration_ms = _milliseconds("duration", duration)
        self._sleep(lambda queue, ptr: lib.tq_sleep(queue, ptr, encoded, duration_ms))

    def sleep_until(self, name: str, when) -> None:
        """Sleeps the task until ``when`` (a ``datetime``, or seconds since
        the Unix epoch), durably: the sleep named ``name`` records its end
        among the task's steps at its first call, and every later call
        reads it. Before the end, the task is handed back until then,
        spending no attempt and keeping its steps, and ``Suspended`` is
        raised: let it leave the handler. Once the end has passed, returns
        at once. Raises as ``finish`` does."""
        encoded = _event_key(name, "sleep name")
        unix_ms = _unix_ms(when, "when")
        self._sleep(lambda queue, ptr: lib.tq_sleep_until(queue, ptr, encoded, unix_ms))

    def _sleep(self, call) -> None:
        if self._settle(call, None) == SUSPENDED:
            self._end_suspended()

    def _end_suspended(self):
        """Ends this delivery as handed back to wait, raising ``Suspended``."""
        with self._lock:
            self._end(errors.NotHeldError, f"task {self.id} was handed back to wait")
        raise errors.Suspended(f"task {self.id} was handed back to wait")

    def snooze(self, delay=0) -> None:
        """Hands this delivery back: the task runs again ``delay`` seconds (or
        a ``timedelta``) from now, and this delivery does not count as an
        attempt. For a worker that cannot do the task yet. Raises as
        ``finish`` does."""
        delay_ms = _milliseconds("delay", delay)
        self._settle(lambda queue, ptr: lib.tq_snooze(queue, ptr, delay_ms), "snoozed")

    def finish_and_pull(self, timeout=None, *, lease=None, cancel=None) -> "Task | None":
        """Finishes this delivery and claims the next ready task of its queue
        in the same transaction (one commit instead of two), returning it, or
        None when none is ready within ``timeout``. When none is ready at
        once, waits as ``Queue.pull`` does, this task already finished: an
        exception from the wait (Ctrl-C, ``ClosedError``, ``Interrupted``)
        leaves it finished. ``lease`` applies to the next task. Raises as
        ``finish`` does (then nothing is finished or claimed)."""
        wait = 0.0 if timeout is None else _seconds("timeout", timeout)
        if cancel is not None and not isinstance(cancel, Cancel):
            raise TypeError(f"cancel must be a tq.Cancel, not {type(cancel).__name__}")
        options = None
        if lease is not None:
            options = _PULL_OPTIONS.build([(lib.tq_pull_options_set_lease_ms, _milliseconds("lease", lease))])
        out = TASK_P()
        try:
            status = self._settle(
                lambda queue, ptr: lib.tq_finish_and_pull(queue, ptr, options, byref(out)), "finished"
            )
        finally:
            _PULL_OPTIONS.free(options)
        if status == OK:
            return Task(self._queue, out)
        if not wait:
            return None
        return self._queue.pull(timeout, lease=lease, cancel=cancel)

    def watch_cancellation(self, callback=None) -> "CancellationWatch":
        """Starts a thread that is told, without polling, when this task's
        cancellation (``Queue.cancel_task``, from any process) is recorded:
        it then sets the returned watch's ``cancelled`` event and calls
        ``callback(task)``, when given, on that thread. Stop working on the
        task then: its next ``extend``, ``finish``, ``fail`` or ``snooze``
        raises ``CancelledError``.

        The watch ends on its own once the delivery is over, and at
        ``stop()``, leaving its ``with`` block, ``close()`` of the task or
        its queue::

            with task.watch_cancellation() as watch:
                for step in steps:
                    if watch.cancelled.is_set():
                        break
                    step()

        A task has one watch at a time (``InvalidArgumentError`` while one
        runs); raises as ``finish`` does once the delivery is over."""
        with self._lock:
            self._live()
            if self._watch is not None and self._watch.running:
                raise errors.InvalidArgumentError(f"task {self.id} is already watched")
            self._watch = CancellationWatch(self, self._ptr, callback)
            return self._watch

    def _settle(self, call, ended_as) -> int:
        """Runs ``call(queue, task)``, a C call on this delivery, and returns
        its status. A delivery found not held is over; one that succeeded is
        over when ``ended_as`` says how ("finished", "failed")."""
        with self._lock:
            ptr = self._live()
            try:
                with self._queue._handle as queue:
                    status = _check(call(queue, ptr))
            except (errors.NotHeldError, errors.CancelledError) as error:
                self._end(errors.NotHeldError, f"task {self.id}: {error.message}")
                raise
            if ended_as is not None:
                self._end(errors.NotHeldError, f"task {self.id} was already {ended_as}")
            return status

    def close(self) -> None:
        """Frees the delivery without finishing the task (if it was not
        finished or failed). Idempotent; the fields stay readable."""
        with self._lock:
            if self._ptr is None:
                return
            if self._fields is None:
                self._fields = _read_fields(self._ptr)
            if self._ended is None:
                self._end(errors.ClosedError, f"task {self.id} is closed")
            if self._watch is not None:
                # Its wait reads the task: it must return before the free.
                self._watch.stop()
            ptr, self._ptr = self._ptr, None
            self._free_task(ptr)

    def __del__(self):
        if self._ptr is not None:
            self._free_task(self._ptr)

    @property
    def closed(self) -> bool:
        """True once the delivery ended: finished, failed, lost or closed."""
        return self._ended is not None

    def __enter__(self) -> "Task":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<tq.Task id={self.id} attempts={self.attempts} raw={self.raw[:60]!r}>"

    def __reduce__(self):
        raise TypeError(
            "a tq.Task cannot be pickled or sent to another process: finish it in the process that pulled it"
        )

    def _live(self):
        """The task pointer, or the exception saying why the delivery ended."""
        if self._ended is not None:
            cls, message = self._ended
            raise cls(message)
        return self._ptr

    def _end(self, cls, message) -> None:
        self._ended = (cls, message)


class Step:
    """A step of a held task run as a block (``with task.step(name) as
    step:``): ``done`` and ``output`` as recorded when the block began; an
    ``output`` set in a block not yet done is recorded when the block ends
    without an exception."""

    __slots__ = ("_task", "name", "done", "output")

    def __init__(self, task: "Task", name: str):
        self._task = task
        self.name = name
        self.done = False
        self.output = None

    def __enter__(self) -> "Step":
        recorded = self._task._step_get(self.name)
        self.done = recorded is not None
        self.output = None if recorded is None else json.loads(recorded)
        return self

    def __exit__(self, exc_type, exc, traceback) -> bool:
        if exc_type is None and not self.done:
            text = _json_text("step's output", self.output)
            if not self._task._step_put(self.name, text):
                text = self._task._step_get(self.name)
            self.done = True
            self.output = json.loads(text)
        return False


class StepRecord(NamedTuple):
    """A step as a snapshot lists it: its name, its output parsed from
    JSON, its ``raw_output`` exactly as recorded, and when it was recorded
    (an aware ``datetime`` in UTC)."""

    name: str
    output: object
    raw_output: bytes
    recorded_at: datetime.datetime


def _event_key(key: str, what: str = "event key") -> bytes:
    """An event's key or a sleep's name for a NUL-terminated C string."""
    if not isinstance(key, str):
        raise TypeError(f"an {what} must be a str, not {type(key).__name__}")
    if "\0" in key:
        raise errors.InvalidArgumentError(f"the {what} contains a NUL byte")
    return key.encode("utf-8", "surrogatepass")


def _step_name(name: str) -> bytes:
    """A step's name for a NUL-terminated C string."""
    if not isinstance(name, str):
        raise TypeError(f"a step name must be a str, not {type(name).__name__}")
    if "\0" in name:
        raise errors.InvalidArgumentError("the step name contains a NUL byte")
    return name.encode("utf-8", "surrogatepass")


def _read_steps(ptr) -> tuple:
    """The steps a snapshot lists, in the order they were recorded."""
    steps = []
    for index in range(lib.tq_task_step_count(ptr)):
        raw = lib.tq_task_step_output(ptr, index)
        at = lib.tq_task_step_recorded_at_unix_ms(ptr, index)
        steps.append(
            StepRecord(
                lib.tq_task_step_name(ptr, index).decode("utf-8", "replace"),
                json.loads(raw),
                raw,
                datetime.datetime.fromtimestamp(at / 1000, datetime.timezone.utc),
            )
        )
    return tuple(steps)


class AttemptRecord(NamedTuple):
    """A delivery that ended without finishing its task, as a snapshot
    lists it: its number (1 for the first, again from 1 after a retry of the
    dead), its outcome (``"failed"``, ``"lease expired"``, ``"holder died"``,
    ``"cancelled"``), its reason (or None), its holder's id and process id
    (None when unknown; the pid on SQLite only), and when it started (None
    when unknown) and ended, as aware ``datetime`` values in UTC."""

    attempt: int
    outcome: str
    reason: "str | None"
    holder_id: "int | None"
    holder_pid: "int | None"
    started_at: "datetime.datetime | None"
    ended_at: datetime.datetime


_OUTCOMES = ("failed", "lease expired", "holder died", "cancelled")


def _utc_ms(at: int) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(at / 1000, datetime.timezone.utc)


def _read_attempts(ptr) -> tuple:
    """The ended attempts a snapshot lists, oldest first."""
    attempts = []
    for index in range(lib.tq_task_attempt_count(ptr)):
        reason = lib.tq_task_attempt_reason(ptr, index)
        holder = lib.tq_task_attempt_holder_id(ptr, index)
        pid = lib.tq_task_attempt_holder_pid(ptr, index)
        started = lib.tq_task_attempt_started_at_unix_ms(ptr, index)
        attempts.append(
            AttemptRecord(
                lib.tq_task_attempt_number(ptr, index),
                _OUTCOMES[lib.tq_task_attempt_outcome(ptr, index)],
                None if reason is None else reason.decode("utf-8", "replace"),
                holder or None,
                pid or None,
                _utc_ms(started) if started else None,
                _utc_ms(lib.tq_task_attempt_ended_at_unix_ms(ptr, index)),
            )
        )
    return tuple(attempts)


class TaskSnapshot(_TaskFields):
    """A task as ``Queue.list``, ``Queue.task`` or ``Queue.wait`` read it:
    the same read-only fields as a ``Task`` (``id``, ``attempts``,
    ``payload``, ``raw``, ``priority``, ``max_attempts``, ``run_at``,
    ``last_error``, ``state``), and its ``result`` and ``progress``, copied
    out of the library. A snapshot is not held: it cannot be finished or
    failed."""

    __slots__ = ("_raw_result", "_raw_progress", "_result", "_progress", "_steps", "_ended_attempts")

    def __init__(self, ptr):
        """Copies the task at ``ptr``, which stays the caller's; not for
        direct use."""
        self._copy(ptr)
        self._fields = _read_fields(ptr)
        self._raw_result = lib.tq_task_result(ptr)
        self._raw_progress = lib.tq_task_progress(ptr)
        self._result = self._progress = _NOT_PARSED
        self._steps = _read_steps(ptr)
        self._ended_attempts = _read_attempts(ptr)

    @staticmethod
    def _adopt(ptr) -> "TaskSnapshot":
        """A snapshot of ``ptr``, which it frees."""
        try:
            return TaskSnapshot(ptr)
        finally:
            lib.tq_task_free(ptr)

    @property
    def raw_result(self) -> "bytes | None":
        """The JSON text the task was finished with (``Task.finish``'s
        ``result``), exactly as given, or None when it has none."""
        return self._raw_result

    @property
    def result(self):
        """The result parsed from JSON (on first use; ``json.loads``), or
        None when it has none (``raw_result`` tells that from JSON null)."""
        if self._result is _NOT_PARSED:
            self._result = None if self._raw_result is None else json.loads(self._raw_result)
        return self._result

    @property
    def raw_progress(self) -> "bytes | None":
        """The JSON text its holder last recorded (``Task.extend``'s
        ``progress``), in this delivery or an earlier one, or None."""
        return self._raw_progress

    @property
    def progress(self):
        """The progress parsed from JSON (on first use), or None when none
        was recorded (``raw_progress`` tells that from JSON null)."""
        if self._progress is _NOT_PARSED:
            self._progress = None if self._raw_progress is None else json.loads(self._raw_progress)
        return self._progress

    @property
    def steps(self) -> "tuple[StepRecord, ...]":
        """The steps its deliveries recorded (``Task.step``), in the order
        they were recorded, as ``Queue.task`` or ``Queue.wait`` read them;
        empty in a ``Queue.list`` page."""
        return self._steps

    @property
    def ended_attempts(self) -> "tuple[AttemptRecord, ...]":
        """Its deliveries that ended without finishing it (failed, lease
        taken back, cancelled while held), oldest first: the newest
        ``tq.ATTEMPTS_KEPT``, as ``Queue.task`` or ``Queue.wait`` read them;
        empty in a ``Queue.list`` page."""
        return self._ended_attempts

    def __repr__(self) -> str:
        return (
            f"<tq.TaskSnapshot id={self.id} state={self.state.name.lower()} "
            f"attempts={self.attempts} raw={self.raw[:60]!r}>"
        )
