"""``Queue``, ``Task``, ``TaskSnapshot`` and ``Cancel``: libtq's objects in Python.

Ownership. A ``Queue`` owns one ``tq_queue`` handle, a ``Task`` one
``tq_task`` and a ``Cancel`` one ``tq_cancel``. Each is freed exactly once:
by ``close()`` (or leaving a ``with`` block), or, as a safety net, when the
object is garbage collected (``weakref.finalize``; ``__del__`` for tasks). A task's id, attempt
count and payload are copied into Python when it is pulled; its other
fields are read on first use and copied before it is freed, so they all
stay readable afterwards. ``Queue.list``, ``Queue.task`` and ``Queue.wait``
copy whole tasks into ``TaskSnapshot`` objects and free the library's
copies at once.

Threads. A ``Queue`` may be shared by any number of threads, as libtq's
handle may. ``close()`` interrupts the pulls waiting on other threads and
never frees the handle under a call in progress: the last call to return
frees it. Calls made after ``close()`` raise ``ClosedError``.

Waiting. A pull with a timeout waits inside the library (``tq_pull`` with
a wait time), which wakes at once for a push to its queue, from this
process or another. It waits in slices of at most
``WAIT_SLICE`` seconds on the main thread, so that Python gets control
back that often: a Ctrl-C raises ``KeyboardInterrupt`` within a slice.
Other threads, which never run signal handlers, wait in one call (of up
to an hour). ``Queue.wait`` waits for a task's outcome the same way.

Errors. A failed C call raises the exception for its status, carrying
``tq_last_error()``, which is read on the same thread straight after the
call (freeing a live object, as a finalizer may do in between, leaves the
message alone).
"""

import ctypes
import datetime
import enum
import json
import math
import numbers
import os
import re
import threading
import time
import weakref
from ctypes import byref, c_char_p, c_int32, c_int64, c_size_t, c_uint32, c_uint64
from typing import TYPE_CHECKING, NamedTuple

from . import errors
from ._native import PUSH_OPTIONS_P, QUEUE_P, SCHEDULE_P, TASK_P, lib

if TYPE_CHECKING:
    from ._work import WorkStats

OK = 0
EMPTY = 1
DUPLICATE = 2

_UINT32_MAX = 2**32 - 1
_UINT64_MAX = 2**64 - 1
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_SIZE_MAX = ctypes.c_size_t(-1).value
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)

#: The longest a waiting pull stays inside one library call, in seconds.
#: Between two calls Python runs its signal handlers (Ctrl-C).
WAIT_SLICE = 0.1

# The same off the main thread, where no signal handler runs: only a wait
# without a bound is cut into calls.
_OFF_MAIN_WAIT_SLICE = 3600.0

# tq_push_batch names the payload that failed the batch at the start of its
# message.
_PAYLOAD_INDEX = re.compile(r"payload (\d+): ")

# tq_push_items names the item that failed at the start of its message.
_ITEM_INDEX = re.compile(r"item (\d+): ")

# tq_push_options_set_on_parent_failure's TQ_PARENT_FAILURE_RUN_ANYWAY.
_PARENT_FAILURE_RUN_ANYWAY = 1

# Why a delivery is no longer held, when the library does not say.
_LOST = "finished, recovered or taken by another worker"

# Errors of a call that refuse it only for a while (BusyError: the file's
# write lock held past the busy timeout; IoError: on PostgreSQL, a
# connection cut or a server restarting): the cancellation watch and
# ``Queue.work`` try it again after these waits, in seconds, doubling.
_TRANSIENT = (errors.BusyError, errors.IoError)
_FIRST_RETRY_S = 0.05
_MAX_RETRY_S = 2.0


class Durability(enum.IntEnum):
    """How far a call's write must reach before it returns (``tq_durability``)."""

    #: Flushed to disk: survives a process crash and a power loss (the default).
    FULL = 0
    #: Survives a process crash; a power loss may lose the latest commits.
    NORMAL = 1


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


#: What ``Queue.paused_until`` returns for a pause with no end, and what
#: ``Queue.pause`` takes for one (the default).
UNTIL_RESUMED = float("inf")


class CatchUp(enum.IntEnum):
    """What the slots of a schedule that came due while nothing drove it
    become when something next does (``tq_catch_up``)."""

    #: The latest due slot runs if it came due at most a minute ago; the
    #: others are skipped.
    SKIP = 0
    #: The latest due slot runs, however late: one run for all missed (the default).
    ONE = 1
    #: Every due slot runs, the latest ``catch_up_limit`` of them, in slot order.
    EACH = 2


class Schedule(NamedTuple):
    """A schedule as ``Queue.schedules`` lists it."""

    name: str
    #: The cron expression, or None for an interval.
    cron: "str | None"
    #: The interval in seconds, or None for a cron expression.
    every: "float | None"
    time_zone: str
    #: The payload of its tasks, parsed from JSON.
    payload: object
    priority: int
    max_attempts: int
    catch_up: CatchUp
    #: The most slots ``CatchUp.EACH`` runs at once (1 for the others).
    catch_up_limit: int
    paused: bool
    #: Its next slot not yet enqueued, in seconds since the Unix epoch (on
    #: PostgreSQL, on the server's clock).
    next_slot: float


class Pushed(NamedTuple):
    """What ``Queue.push_unique`` returns: the task's id, and whether this
    push stored it (False: a task holding the key already existed, and
    ``id`` is that task's)."""

    id: int
    created: bool


def _check(status: int) -> int:
    """Returns a non-negative status; raises the exception for a negative one
    with this thread's ``tq_last_error()``. Call straight after the C call."""
    if status < 0:
        raise errors.from_status(status, lib.tq_last_error().decode("utf-8", "replace"))
    return status


def _enum_value(kind, value):
    """The integer of an enum member given as a member, an integer (passed on
    for the library to judge) or a member's name in any case."""
    if isinstance(value, str):
        try:
            return kind[value.upper()]
        except KeyError:
            names = ", ".join(member.name.lower() for member in kind)
            raise errors.InvalidArgumentError(
                f"unknown {kind.__name__.lower()} {value!r}; expected one of {names}"
            ) from None
    if isinstance(value, int):
        return int(value)
    raise TypeError(
        f"{kind.__name__.lower()} must be a tq.{kind.__name__} or its name, not {type(value).__name__}"
    )


def _integer(name: str, value, low: int, high: int) -> int:
    """An integer argument within the C type's range [low, high]."""
    if not isinstance(value, numbers.Integral) or isinstance(value, bool):
        raise TypeError(f"{name} must be an integer, not {type(value).__name__}")
    value = int(value)
    if not low <= value <= high:
        raise errors.InvalidArgumentError(f"{name} must be between {low} and {high}, not {value}")
    return value


def _seconds(name: str, value) -> float:
    """A duration in seconds (a real number or a ``timedelta``), at least 0."""
    if isinstance(value, datetime.timedelta):
        value = value.total_seconds()
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        raise TypeError(f"{name} must be a number of seconds, not {type(value).__name__}")
    value = float(value)
    if math.isnan(value) or value < 0:
        raise errors.InvalidArgumentError(f"{name} must be at least 0 seconds, not {value!r}")
    return value


def _milliseconds(name: str, value) -> int:
    """A duration in seconds as whole milliseconds for a uint64_t argument,
    rounded up so that a short positive duration does not become 0. Values
    past uint64_t are clamped, for the library to refuse as out of range."""
    seconds = _seconds(name, value)
    if math.isinf(seconds):
        return _UINT64_MAX
    return min(math.ceil(round(seconds * 1000, 6)), _UINT64_MAX)


def _unix_ms(value) -> int:
    """A point in time (a ``datetime`` or seconds since the Unix epoch) as
    milliseconds since the epoch, clamped to int64_t for the library to judge."""
    if isinstance(value, datetime.datetime):
        value = value.timestamp()
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        raise TypeError(f"run_at must be a datetime or seconds since the epoch, not {type(value).__name__}")
    value = float(value)
    if math.isnan(value):
        raise errors.InvalidArgumentError("run_at must be a time, not nan")
    if math.isinf(value):
        return _INT64_MAX if value > 0 else _INT64_MIN
    return max(_INT64_MIN, min(round(value * 1000), _INT64_MAX))


def _c_string(name: str, value) -> bytes:
    """A ``str`` as UTF-8 for a NUL-terminated C string. Lone surrogates are
    passed through, for the library to refuse as not UTF-8."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, not {type(value).__name__}")
    if "\0" in value:
        raise errors.InvalidArgumentError(f"{name} {value!r} contains a NUL character")
    return value.encode("utf-8", "surrogatepass")


def _reason(reason) -> "bytes | None":
    """A failure reason for tq_fail: a ``str``, an exception (as "Type:
    message") or None. Any text is kept: NUL and lone surrogates, which a
    C string cannot carry, are written as backslash escapes."""
    if reason is None:
        return None
    if isinstance(reason, BaseException):
        reason = f"{type(reason).__name__}: {reason}"
    elif not isinstance(reason, str):
        raise TypeError(f"reason must be a str or an exception, not {type(reason).__name__}")
    return reason.encode("utf-8", "backslashreplace").replace(b"\0", b"\\x00")


# Compact, and non-ASCII text kept as UTF-8 rather than escaped. One encoder
# for all calls: json.dumps with options would build a new one each time.
_JSON_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def _encode(obj) -> bytes:
    """The JSON text for a payload: bytes and str as given (str in UTF-8),
    anything else through ``json.dumps``. Lone surrogates are passed through,
    so that the library, not the encoder, refuses the text."""
    if isinstance(obj, bytes):
        return obj
    if isinstance(obj, str):
        return obj.encode("utf-8", "surrogatepass")
    if isinstance(obj, (bytearray, memoryview)):
        return bytes(obj)
    return _JSON_ENCODER.encode(obj).encode("utf-8", "surrogatepass")


def _json_text(name: str, obj) -> bytes:
    """The JSON text of a result or progress for a NUL-terminated C string:
    ``obj`` as ``_encode`` makes a payload of it. A NUL byte, which no JSON
    text has, is refused rather than cutting the text short."""
    data = _encode(obj)
    at = data.find(b"\0")
    if at >= 0:
        raise errors.InvalidJSONError(f"the {name} contains a NUL byte (at byte {at})")
    return data


def _path_bytes(path) -> bytes:
    """A file path as bytes for a NUL-terminated C string."""
    encoded = os.fsencode(path)
    if b"\0" in encoded:
        # Not shown: the path may be a URL with a password.
        at = encoded.index(b"\0")
        raise errors.InvalidArgumentError(f"the path contains a NUL byte (at byte {at})")
    return encoded


def _redacted(path) -> str:
    """``path`` as messages show it: a URL without its password
    (``tq_location_redacted``), a file path unchanged."""
    encoded = _path_bytes(path)
    length = c_size_t()
    _check(lib.tq_location_redacted(encoded, None, 0, byref(length)))
    shown = ctypes.create_string_buffer(length.value + 1)
    _check(lib.tq_location_redacted(encoded, shown, len(shown), byref(length)))
    return shown.value.decode("utf-8")


class _Options:
    """Builds an options object of one kind, applying setters one by one and
    freeing the object if a setter refuses its value."""

    def __init__(self, new, free):
        self._new = new
        self._free = free

    def build(self, settings):
        """A new options object with each (setter, *values) applied."""
        options = self._new()
        if not options:
            raise errors.InternalError(f"{self._new.__name__} returned NULL")
        try:
            for setter, *values in settings:
                _check(setter(options, *values))
        except BaseException:
            self._free(options)
            raise
        return options

    def free(self, options):
        """Frees an object from ``build``; None is ignored."""
        if options:
            self._free(options)


_OPEN_OPTIONS = _Options(lib.tq_options_new, lib.tq_options_free)
_PUSH_OPTIONS = _Options(lib.tq_push_options_new, lib.tq_push_options_free)
_PULL_OPTIONS = _Options(lib.tq_pull_options_new, lib.tq_pull_options_free)
_SCHEDULE_OPTIONS = _Options(lib.tq_schedule_options_new, lib.tq_schedule_options_free)


def _push_settings(
    delay,
    run_at,
    priority,
    max_attempts,
    unique_key=None,
    unique_for=None,
    after=(),
    after_items=(),
    run_anyway=False,
    group=None,
    group_max=None,
):
    """The push options' setters and values for the arguments given."""
    settings = []
    if group is not None:
        limit = 1 if group_max is None else _integer("group_max", group_max, 0, _UINT32_MAX)
        settings.append((lib.tq_push_options_set_group, _c_string("group", group), limit))
    elif group_max is not None:
        raise errors.InvalidArgumentError("group_max needs a group: give group too")
    for parent in after:
        settings.append((lib.tq_push_options_add_after, _integer("after", parent, _INT64_MIN, _INT64_MAX)))
    for index in after_items:
        settings.append((lib.tq_push_options_add_after_item, _integer("after_items", index, 0, _SIZE_MAX)))
    if run_anyway:
        settings.append((lib.tq_push_options_set_on_parent_failure, _PARENT_FAILURE_RUN_ANYWAY))
    if delay is not None and run_at is not None:
        raise errors.InvalidArgumentError("give delay or run_at, not both")
    if delay is not None:
        settings.append((lib.tq_push_options_set_delay_ms, _milliseconds("delay", delay)))
    if run_at is not None:
        settings.append((lib.tq_push_options_set_run_at_unix_ms, _unix_ms(run_at)))
    if priority is not None:
        settings.append(
            (lib.tq_push_options_set_priority, _integer("priority", priority, _INT32_MIN, _INT32_MAX))
        )
    if max_attempts is not None:
        settings.append(
            (lib.tq_push_options_set_max_attempts, _integer("max_attempts", max_attempts, 0, _UINT32_MAX))
        )
    if unique_key is not None:
        settings.append((lib.tq_push_options_set_unique_key, _c_string("unique_key", unique_key)))
    if unique_for is not None:
        # Without a key the library refuses the window, with its message.
        settings.append((lib.tq_push_options_set_unique_for_ms, _milliseconds("unique_for", unique_for)))
    return settings


class Cancel:
    """Ends the wait of the pulls given it, from any thread.

    Pass it to ``Queue.pull``, ``Queue.pull_many`` or
    ``Task.finish_and_pull`` as ``cancel=``; ``trigger()`` then makes those
    waiting raise ``tq.Interrupted``, now and later (a pull still takes a
    task that is ready). Triggering is permanent: use a new ``Cancel`` for
    each operation to cancel. Freed when garbage collected.
    """

    __slots__ = ("_ptr", "_free", "__weakref__")

    def __init__(self):
        ptr = lib.tq_cancel_new()
        if not ptr:
            raise errors.InternalError("tq_cancel_new returned NULL")
        self._ptr = ptr
        self._free = weakref.finalize(self, lib.tq_cancel_free, ptr)

    def trigger(self) -> None:
        """Ends the wait of every pull given this object; safe from any thread."""
        _check(lib.tq_cancel_trigger(self._ptr))


class _Handle:
    """Owns a ``tq_queue`` pointer and counts the calls using it.

    ``with handle as queue:`` brackets one C call; ``close()`` frees the
    handle at once when no call is in progress, else interrupts the waiting
    pulls and lets the last call to end free it (libtq requires
    ``tq_close`` to follow every other call)."""

    __slots__ = ("_ptr", "_lock", "_calls", "_closing", "_name")

    def __init__(self, ptr, name):
        self._ptr = ptr
        self._lock = threading.Lock()
        self._calls = 0
        self._closing = False
        self._name = name

    def __enter__(self):
        with self._lock:
            if self._closing:
                raise self.closed_error()
            self._calls += 1
            return self._ptr

    def __exit__(self, *exc_info):
        with self._lock:
            self._calls -= 1
            if not self._closing or self._calls:
                return
            ptr, self._ptr = self._ptr, None
        lib.tq_close(ptr)

    @property
    def closed(self) -> bool:
        return self._closing

    def closed_error(self) -> errors.ClosedError:
        return errors.ClosedError(f"the queue {self._name} is closed")

    def close(self):
        with self._lock:
            if self._closing:
                return
            self._closing = True
            if self._calls:
                # The calls in progress hold the pointer alive; pulls among
                # them that wait return with TQ_ERR_INTERRUPTED.
                lib.tq_interrupt(self._ptr)
                return
            ptr, self._ptr = self._ptr, None
        lib.tq_close(ptr)


class Queue:
    """A named queue in one SQLite file, opened (and created if needed) at ``path``.

    Options (each defaults to the library's default when omitted):

    - ``queue``: the name of the queue in the file (default ``"default"``);
      one file holds any number of independent queues.
    - ``durability``: ``tq.Durability.FULL`` (default) or ``NORMAL``, or the
      names ``"full"`` and ``"normal"``.
    - ``busy_timeout``: seconds a call waits for other processes' writes
      before raising ``BusyError`` (default 5).
    - ``keep_history``: keep finished tasks as done (default False).
    - ``result_retention``: seconds (or a ``timedelta``) a task finished
      here with a result (``Task.finish(result=...)``) is kept for it when
      the handle keeps no history: 0.001 to one year (default 7 days).
      Later finishes with a result delete the tasks whose time has passed;
      with ``keep_history`` a result stays with its done task until
      ``purge``.
    - ``max_payload_len``: the largest payload this handle pushes, in bytes.
    - ``max_attempts``: deliveries a task pushed here gets before a failure
      makes it dead (default ``tq.DEFAULT_MAX_ATTEMPTS``, 25).
    - ``retry_backoff``: ``(min, max)`` seconds (or ``timedelta``) before a
      failed task is retried: ``min`` after the first failure, doubling up
      to ``max``, with jitter (default ``(1, 3600)``).

    A ``path`` that is a ``postgres://`` or ``postgresql://`` URL opens the
    queue in that PostgreSQL database instead, shared by any number of
    machines. Two options apply to it alone (an SQLite file with either
    raises ``InvalidArgumentError``):

    - ``pool_size``: connections the handle keeps at most, 1 to
      ``tq.MAX_POOL_SIZE`` (default ``tq.DEFAULT_POOL_SIZE``, 4); calls
      beyond that wait for one up to ``busy_timeout``.
    - ``postgres_schema``: the schema holding tq's tables (default
      ``"tq"``): 1 to 63 ASCII letters, digits and ``_``, not starting with
      a digit or ``pg_``; created when missing.

    Use it as a context manager, or call ``close()``. Any number of threads
    may share one ``Queue``; several processes may open the same file.
    Raises ``IoError``, ``NotADatabaseError``, ``InvalidArgumentError`` or
    ``BusyError`` when the file cannot be opened as a queue.
    """

    def __init__(
        self,
        path,
        *,
        queue=None,
        durability=None,
        busy_timeout=None,
        keep_history=None,
        result_retention=None,
        max_payload_len=None,
        max_attempts=None,
        retry_backoff=None,
        pool_size=None,
        postgres_schema=None,
    ):
        self.path = path
        self.name = "default" if queue is None else queue
        settings = []
        if queue is not None:
            settings.append((lib.tq_options_set_queue, _c_string("queue", queue)))
        if durability is not None:
            settings.append((lib.tq_options_set_durability, _enum_value(Durability, durability)))
        if busy_timeout is not None:
            settings.append((lib.tq_options_set_busy_timeout_ms, _milliseconds("busy_timeout", busy_timeout)))
        if keep_history is not None:
            settings.append((lib.tq_options_set_keep_history, bool(keep_history)))
        if result_retention is not None:
            settings.append(
                (lib.tq_options_set_result_retention_ms, _milliseconds("result_retention", result_retention))
            )
        if max_payload_len is not None:
            if not isinstance(max_payload_len, int) or max_payload_len < 0:
                raise errors.InvalidArgumentError(
                    f"max_payload_len must be a number of bytes, not {max_payload_len!r}"
                )
            settings.append((lib.tq_options_set_max_payload_len, min(max_payload_len, _SIZE_MAX)))
        if max_attempts is not None:
            settings.append(
                (lib.tq_options_set_max_attempts, _integer("max_attempts", max_attempts, 0, _UINT32_MAX))
            )
        if retry_backoff is not None:
            try:
                low, high = retry_backoff
            except (TypeError, ValueError):
                raise TypeError(
                    f"retry_backoff must be a pair (min, max) of seconds, not {retry_backoff!r}"
                ) from None
            settings.append(
                (
                    lib.tq_options_set_retry_backoff_ms,
                    _milliseconds("retry_backoff", low),
                    _milliseconds("retry_backoff", high),
                )
            )
        if pool_size is not None:
            settings.append((lib.tq_options_set_pool_size, _integer("pool_size", pool_size, 0, _UINT32_MAX)))
        if postgres_schema is not None:
            settings.append(
                (lib.tq_options_set_postgres_schema, _c_string("postgres_schema", postgres_schema))
            )
        encoded = _path_bytes(path)
        options = _OPEN_OPTIONS.build(settings) if settings else None
        out = QUEUE_P()
        try:
            _check(lib.tq_open(encoded, options, byref(out)))
        finally:
            _OPEN_OPTIONS.free(options)
        self._shown_path = _redacted(path)
        self._handle = _Handle(out, f"{self.name!r} in {self._shown_path!r}")
        self._finalizer = weakref.finalize(self, self._handle.close)

    def close(self) -> None:
        """Closes the queue. Idempotent. Pulls waiting on other threads
        return (raising ``ClosedError``), other calls in progress finish
        first; later calls raise ``ClosedError``. Tasks already pulled can
        still be read and closed, but no longer finished."""
        self._finalizer()

    @property
    def closed(self) -> bool:
        """True once ``close()`` was called."""
        return self._handle.closed

    def __enter__(self) -> "Queue":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return f"<tq.Queue {self._shown_path!r} queue={self.name!r} {state}>"

    def __reduce__(self):
        raise TypeError(
            "a tq.Queue cannot be pickled or sent to another process: send its path and open a Queue there"
        )

    # --- Pushing --------------------------------------------------------------

    def push(
        self,
        obj,
        *,
        delay=None,
        run_at=None,
        priority=None,
        max_attempts=None,
        unique_key=None,
        unique_for=None,
        after=(),
        run_anyway=False,
        group=None,
        group_max=None,
    ) -> int:
        """Stores a task and returns its id once it is stored at the queue's
        durability.

        ``obj`` is the payload: ``bytes`` and ``str`` are taken as JSON text
        exactly as given (``push('"hello"')`` stores the JSON string hello;
        ``push("hello")`` is refused as invalid JSON), anything else is
        serialized with ``json.dumps`` (a ``TypeError`` for what it cannot
        serialize).

        - ``delay`` (seconds or a ``timedelta``) or ``run_at`` (a
          ``datetime`` or seconds since the Unix epoch) hold the task back.
        - ``priority``: any 32-bit integer, default 0; higher is claimed first.
        - ``max_attempts``: deliveries before a failure makes it dead,
          instead of the queue's default.
        - ``unique_key`` (a ``str``): while a task of this queue holding the
          key is pending or leased, nothing is stored and that task's id is
          returned (``push_unique`` tells the two cases apart).
          ``unique_for`` (seconds) keeps the key reserved that long after
          the task is done.
        - ``after``: ids of tasks of this queue the task waits for: it is
          stored blocked (counted and listed as pending, never pulled) until
          each is done. Each must be stored at the push: not yet finished,
          or kept as history. ``run_anyway``: one of them ending dead or
          cancelled counts as finished, instead of cancelling this task (and
          those waiting for it).
        - ``group`` (a ``str``): the ordered group of the queue the task
          belongs to, whose tasks are delivered at most ``group_max`` (1 to
          ``MAX_GROUP_AT_ONCE``, default 1) at a time, in push order for 1,
          while other groups proceed. The task waits for the
          ``group_max``-th most recent unfinished task of the group, if any
          (in ``waiting_for`` while blocked, not in ``parents``); that task
          ending in any way lets it run.

        Raises ``InvalidJSONError``, ``InvalidArgumentError`` (bad UTF-8,
        over the payload limit, an option out of range), ``BusyError``,
        ``IoError``.
        """
        data = _encode(obj)
        out = c_int64()
        if (
            delay is None
            and run_at is None
            and priority is None
            and max_attempts is None
            and unique_key is None
            and unique_for is None
            and not after
            and not run_anyway
            and group is None
            and group_max is None
        ):
            with self._handle as queue:
                _check(lib.tq_push(queue, data, len(data), None, byref(out)))
            return out.value
        settings = _push_settings(
            delay,
            run_at,
            priority,
            max_attempts,
            unique_key,
            unique_for,
            after,
            run_anyway=run_anyway,
            group=group,
            group_max=group_max,
        )
        self._push_with(data, settings, out)
        return out.value

    def push_unique(
        self, obj, unique_key, *, unique_for=None, delay=None, run_at=None, priority=None, max_attempts=None
    ) -> Pushed:
        """Pushes ``obj`` with the unique key ``unique_key`` (see ``push``) and
        returns ``Pushed(id, created)``: ``created`` is False when a task of
        this queue already held the key, nothing was stored, and ``id`` is
        that task's."""
        if not isinstance(unique_key, str):
            raise TypeError(f"unique_key must be a str, not {type(unique_key).__name__}")
        data = _encode(obj)
        settings = _push_settings(delay, run_at, priority, max_attempts, unique_key, unique_for)
        out = c_int64()
        status = self._push_with(data, settings, out)
        return Pushed(out.value, status != DUPLICATE)

    def _push_with(self, data, settings, out) -> int:
        """tq_push with push options built from ``settings``; returns the status."""
        options = _PUSH_OPTIONS.build(settings)
        try:
            with self._handle as queue:
                return _check(lib.tq_push(queue, data, len(data), options, byref(out)))
        finally:
            _PUSH_OPTIONS.free(options)

    def push_many(
        self, objs, *, delay=None, run_at=None, priority=None, max_attempts=None, group=None, group_max=None
    ) -> "list[int]":
        """Stores every payload of ``objs`` (an iterable, each as ``push``
        takes it) as a task, in order, in one transaction, and returns their
        ids: all of them or none.

        A payload that fails stores nothing and raises with its position in
        ``error.index`` (and in the message): ``InvalidJSONError``,
        ``InvalidArgumentError``, or the ``TypeError`` or ``ValueError`` of
        ``json.dumps``. The options apply to every task; a unique key names
        one task, so ``push_many`` takes none. Also raises ``BusyError``,
        ``IoError`` (``index`` None).
        """
        datas = []
        for index, obj in enumerate(objs):
            try:
                datas.append(_encode(obj))
            except (TypeError, ValueError) as error:
                failed = type(error)(f"payload {index}: {error}")
                failed.index = index
                raise failed from error
        settings = _push_settings(delay, run_at, priority, max_attempts, group=group, group_max=group_max)
        count = len(datas)
        payloads = (c_char_p * count)(*datas)
        lens = (c_size_t * count)(*map(len, datas))
        ids = (c_int64 * count)()
        options = _PUSH_OPTIONS.build(settings) if settings else None
        try:
            with self._handle as queue:
                _check(lib.tq_push_batch(queue, payloads, lens, count, options, ids))
        except errors.Error as error:
            match = _PAYLOAD_INDEX.match(error.message)
            if match:
                error.index = int(match.group(1))
            raise
        finally:
            _PUSH_OPTIONS.free(options)
        return ids[:]

    def push_items(self, items) -> "list[int]":
        """Stores each ``tq.Item`` of ``items`` as ``push`` would, in order,
        in one transaction, and returns their ids (for an item whose unique
        key a task holds, that task's): all of them or none. An item may
        wait for earlier items of the same call (``after_items``), so a
        graph of tasks is stored whole.

        A bad item stores nothing and raises with its position in
        ``error.index``, as ``push_many`` does.
        """
        items = list(items)
        datas, built = [], []
        try:
            for index, item in enumerate(items):
                try:
                    datas.append(_encode(item.payload))
                    built.append(_PUSH_OPTIONS.build(item._settings()))
                except (TypeError, ValueError, errors.Error) as error:
                    if isinstance(error, errors.Error):
                        error.index = index
                        raise
                    failed = type(error)(f"item {index}: {error}")
                    failed.index = index
                    raise failed from error
            count = len(datas)
            payloads = (c_char_p * count)(*datas)
            lens = (c_size_t * count)(*map(len, datas))
            options = (PUSH_OPTIONS_P * count)(*built)
            ids = (c_int64 * count)()
            try:
                with self._handle as queue:
                    _check(lib.tq_push_items(queue, payloads, lens, options, count, ids))
            except errors.Error as error:
                match = _ITEM_INDEX.match(error.message)
                if match:
                    error.index = int(match.group(1))
                raise
            return ids[:]
        finally:
            for options in built:
                _PUSH_OPTIONS.free(options)

    # --- Pulling --------------------------------------------------------------

    def pull(self, timeout=None, *, lease=None, cancel=None) -> "Task | None":
        """Claims the ready task first in line (highest priority, then ready
        longest) and returns it as a ``Task``, or returns None when no task
        is ready.

        ``timeout`` (seconds, a ``timedelta`` or ``math.inf``) waits up to that
        long for a task; None or 0 does not wait. The wait happens inside the
        library: a push to its queue wakes it at once, from this process or
        another. It ends with ``KeyboardInterrupt`` on Ctrl-C
        (within ``WAIT_SLICE``, 0.1 s), with ``ClosedError`` when the queue is
        closed from another thread, and with ``tq.Interrupted`` after
        ``interrupt()`` or when ``cancel`` (a ``tq.Cancel``) is triggered.
        ``lease`` (seconds, default 30) is how long the task is reserved for
        this worker; past it, another worker may claim it.

        Raises ``BusyError``, ``IoError``, ``NotADatabaseError`` (a damaged
        stored task), ``InvalidArgumentError`` (a bad lease or timeout).
        """
        out = TASK_P()
        if timeout is None and lease is None and cancel is None:
            with self._handle as queue:
                status = _check(lib.tq_pull(queue, None, byref(out)))
        else:
            status = self._claim(
                timeout, lease, cancel, lambda queue, options: lib.tq_pull(queue, options, byref(out))
            )
        return Task(self, out) if status == OK else None

    def pull_many(self, n, timeout=None, *, lease=None, cancel=None) -> "list[Task]":
        """Claims up to ``n`` ready tasks in one transaction, in the order
        ``pull`` would return them, and returns them as a list: empty when
        none was ready within ``timeout``. Waits, and takes ``lease`` and
        ``cancel``, as ``pull`` does."""
        n = _integer("n", n, 0, _SIZE_MAX)
        slots = (TASK_P * n)()
        count = c_size_t()
        status = self._claim(
            timeout,
            lease,
            cancel,
            lambda queue, options: lib.tq_pull_batch(queue, options, n, slots, byref(count)),
        )
        if status != OK:
            return []
        return Task._adopt_all(self, slots[: count.value])

    def _claim(self, timeout, lease, cancel, call) -> int:
        """Runs ``call(queue, options)``, a C pull through this queue's handle,
        until it claims (OK) or ``timeout`` has passed (EMPTY). Each call
        waits inside the library for at most ``WAIT_SLICE`` on the main
        thread, and up to an hour on any other."""
        wait = 0.0 if timeout is None else _seconds("timeout", timeout)
        settings = []
        if lease is not None:
            settings.append((lib.tq_pull_options_set_lease_ms, _milliseconds("lease", lease)))
        if cancel is not None:
            if not isinstance(cancel, Cancel):
                raise TypeError(f"cancel must be a tq.Cancel, not {type(cancel).__name__}")
            settings.append((lib.tq_pull_options_set_cancel, cancel._ptr))
        options = _PULL_OPTIONS.build(settings) if settings or wait else None
        try:
            deadline = time.monotonic() + wait
            # Only the main thread runs signal handlers (Ctrl-C): elsewhere
            # a call waits up to an hour, since each call starts with a claim.
            on_main = threading.current_thread() is threading.main_thread()
            slice_ = WAIT_SLICE if on_main else _OFF_MAIN_WAIT_SLICE
            while True:
                if wait:
                    remaining = max(0.0, deadline - time.monotonic())
                    wait_ms = math.ceil(round(min(remaining, slice_) * 1000, 6))
                    _check(lib.tq_pull_options_set_wait_ms(options, wait_ms))
                with self._handle as queue:
                    status = call(queue, options)
                if status == errors.Interrupted.status and self._handle.closed:
                    raise self._handle.closed_error()
                if _check(status) == OK or time.monotonic() >= deadline:
                    return status
        finally:
            _PULL_OPTIONS.free(options)

    def finish_many(self, tasks) -> "list[bool]":
        """Finishes many tasks in one transaction and returns, for each, True
        when it was finished and False when its delivery was no longer
        current (finished already, recovered or taken by another worker),
        which changes nothing and does not stop the others. The tasks may
        have been pulled through any ``Queue`` on the file; a task given
        twice counts once.

        Raises ``ClosedError`` (a closed task: nothing is finished),
        ``BusyError`` or ``IoError`` (nothing is finished; the deliveries
        are still held).
        """
        finished, _ = self._finish_and_claim("finish_many", tasks, 0, None)
        return finished

    def finish_and_pull_many(self, tasks, n, *, lease=None) -> "tuple[list[bool], list[Task]]":
        """Finishes ``tasks`` as ``finish_many`` does and claims up to ``n``
        ready tasks as ``pull_many`` does, in one transaction: a worker's
        finished tasks and the claims of its free handlers share one commit.
        Returns ``(finished, claimed)``: ``finished`` says for each task
        whether it was finished (a task no longer held changes nothing and
        stops neither the others nor the claim), ``claimed`` lists the new
        tasks, empty when none was ready. It never waits: when it claims
        nothing, wait with ``pull``. ``lease`` applies to the new tasks.
        Raises as ``finish_many`` does (then nothing is finished or
        claimed)."""
        n = _integer("n", n, 0, _SIZE_MAX)
        options = None
        if lease is not None:
            options = _PULL_OPTIONS.build([(lib.tq_pull_options_set_lease_ms, _milliseconds("lease", lease))])
        try:
            return self._finish_and_claim("finish_and_pull_many", tasks, n, options)
        finally:
            _PULL_OPTIONS.free(options)

    def _finish_and_claim(self, caller, tasks, n, options) -> "tuple[list[bool], list[Task]]":
        """``finish_and_pull_many`` with its options built, for ``caller``:
        ``n`` 0 only finishes."""
        tasks = [*tasks]
        distinct = {}
        for task in tasks:
            if not isinstance(task, Task):
                raise TypeError(f"{caller} takes tq.Task objects, not {type(task).__name__}")
            distinct[id(task)] = task
        # Each task's lock, taken in one order so that two calls cannot deadlock.
        ordered = [distinct[key] for key in sorted(distinct)]
        locked = 0
        claimed = []
        try:
            for task in ordered:
                task._lock.acquire()
                locked += 1
            live = []
            for task in ordered:
                if task._ended is None:
                    live.append(task)
                elif task._ended[0] is errors.ClosedError:
                    raise errors.ClosedError(task._ended[1])
            count = len(live)
            statuses = (c_int32 * count)()
            pointers = (TASK_P * count)(*[task._ptr for task in live])
            with self._handle as queue:
                if n:
                    slots = (TASK_P * n)()
                    got = c_size_t()
                    _check(
                        lib.tq_finish_and_pull_batch(
                            queue, pointers, count, statuses, options, n, slots, byref(got)
                        )
                    )
                    claimed = Task._adopt_all(self, slots[: got.value])
                else:
                    _check(lib.tq_finish_batch(queue, pointers, count, statuses))
            finished = {}
            for task, status in zip(live, statuses):
                finished[id(task)] = status == OK
                if status == OK:
                    task._end(errors.NotHeldError, f"task {task._id} was already finished")
                else:
                    task._end(errors.NotHeldError, f"task {task._id} is no longer held: {_LOST}")
        finally:
            for task in ordered[:locked]:
                task._lock.release()
        # Tasks whose delivery had ended before were not held.
        return [finished.get(id(task), False) for task in tasks], claimed

    def work(self, handler, *, concurrency=4, lease=30, stop=None, on_error=None) -> "WorkStats":
        """Runs ``handler`` on this queue's tasks, on up to ``concurrency``
        threads at once, until ``stop`` (a ``threading.Event``) is set; then
        claims no more tasks, waits for the handlers running to end and
        their tasks to be finished or failed, and returns a
        ``tq.WorkStats(finished, failed, lost)``.

        ``handler(task)`` returning finishes the task; raising fails it, the
        exception its reason (``"Type: message"``, as ``Task.fail`` writes
        it). A handler that accepts a second argument is called as
        ``handler(task, lost)``: ``lost`` is a ``threading.Event`` set when a
        lease renewal finds the task cancelled or no longer held (stop
        working on it then); handlers that do not look can ignore it.

        A handler thread whose handler returned takes its next task itself:
        one claimed before, or else from one commit that finishes the tasks
        whose handlers returned and claims a task for each free handler
        thread (``finish_and_pull_many``), waiting as ``pull`` does while
        none is ready. The tasks held are never more than the concurrency.
        Handlers that return within about a millisecond are run in turn by
        the thread at hand; longer ones each get a thread. Each task's
        lease (``lease`` seconds or a ``timedelta``, at least 3 ms) is
        renewed every third of it while its handler runs.

        A claim, finish or fail refused for a while (``BusyError``;
        ``IoError``, as while a PostgreSQL server restarts) is tried again
        after waits of 50 ms doubling to 2 s; such errors, and finishes
        and renewals refused for good, go to ``on_error(task, error)``
        (``task`` None for a claim or a whole batch), by default a warning
        on the ``tq`` logger. ``Queue.interrupt()`` stops the work as
        ``stop`` does. Raises, once its handlers have ended,
        ``ClosedError`` when the queue is closed, the error of a claim that
        failed for good (``NotADatabaseError``, ...), and
        ``KeyboardInterrupt`` on Ctrl-C when run on the main thread. Bad
        arguments raise ``TypeError`` or ``InvalidArgumentError`` before
        anything is claimed."""
        from ._work import _MIN_LEASE_S, Worker

        if not callable(handler):
            raise TypeError(f"handler must be callable, not {type(handler).__name__}")
        concurrency = _integer("concurrency", concurrency, 1, _INT32_MAX)
        lease_s = _seconds("lease", lease)
        if lease_s < _MIN_LEASE_S or math.isinf(lease_s):
            raise errors.InvalidArgumentError(
                f"the lease must be at least 3 ms and finite, not {lease_s!r} s"
            )
        if stop is not None and not isinstance(stop, threading.Event):
            raise TypeError(f"stop must be a threading.Event, not {type(stop).__name__}")
        if on_error is not None and not callable(on_error):
            raise TypeError(f"on_error must be callable, not {type(on_error).__name__}")
        return Worker(self, handler, concurrency, lease_s, stop, on_error).run()

    def interrupt(self) -> None:
        """Ends the wait of every pull and ``wait`` on this queue with
        ``tq.Interrupted``, now and from then on (a pull still takes a task
        that is ready, a ``wait`` still returns a task that has ended):
        call it to stop worker threads, join them, then ``close()``."""
        with self._handle as queue:
            _check(lib.tq_interrupt(queue))

    # --- Upkeep and visibility ------------------------------------------------

    def recover(self) -> int:
        """Takes back every leased task of this queue whose lease expired or
        whose holder process is gone, and returns how many: each is pending
        again, or dead if that delivery was its last attempt. Tasks of live
        processes, this one included, are untouched: safe at every start-up."""
        out = c_int64()
        with self._handle as queue:
            _check(lib.tq_recover(queue, byref(out)))
        return out.value

    def count(self, state=State.PENDING) -> int:
        """How many tasks of this queue are in ``state`` (a ``tq.State`` or its
        name: ``"pending"``, ``"leased"``, ``"done"``, ``"dead"``,
        ``"cancelled"``)."""
        value = _enum_value(State, state)
        out = c_int64()
        with self._handle as queue:
            _check(lib.tq_count(queue, value, byref(out)))
        return out.value

    def counts(self) -> "dict[str, int]":
        """The number of tasks in each state, by the state's lower-case name.
        Each state is counted by its own call, so under concurrent work the
        numbers are not one snapshot."""
        return {state.name.lower(): self.count(state) for state in State}

    def oldest_ready_age(self) -> "float | None":
        """How long, in seconds, the task ready longest has waited to be
        claimed, or None when no task is ready."""
        out = c_int64()
        with self._handle as queue:
            status = _check(lib.tq_oldest_ready_age_ms(queue, byref(out)))
        return None if status == EMPTY else out.value / 1000

    def groups_waiting(self) -> int:
        """How many ordered groups of this queue have tasks waiting for their
        turn behind the group's earlier tasks (``push(group=...)``); those
        tasks count as pending."""
        out = c_int64()
        with self._handle as queue:
            _check(lib.tq_groups_waiting(queue, byref(out)))
        return out.value

    def list(self, state=State.PENDING, after_id=0, limit=100) -> "list[TaskSnapshot]":
        """A page of this queue's tasks in ``state``: up to ``limit`` of them
        with ids above ``after_id``, by id, as read-only ``TaskSnapshot``
        objects (not held: they cannot be finished). Pass the last id of a
        page to get the next; a page shorter than ``limit`` is the last.
        ``iter_tasks`` walks every page. A call for tools and monitoring,
        not for a worker's loop."""
        value = _enum_value(State, state)
        after_id = _integer("after_id", after_id, _INT64_MIN, _INT64_MAX)
        limit = _integer("limit", limit, 0, _SIZE_MAX)
        slots = (TASK_P * limit)()
        count = c_size_t()
        with self._handle as queue:
            _check(lib.tq_list(queue, value, after_id, limit, slots, byref(count)))
        listed = slots[: count.value]
        try:
            return [TaskSnapshot(pointer) for pointer in listed]
        finally:
            for pointer in listed:
                lib.tq_task_free(pointer)

    def iter_tasks(self, state=State.PENDING, *, page_size=100):
        """Every task of this queue in ``state``, by id, as ``TaskSnapshot``
        objects read ``page_size`` at a time (one ``list`` call per page)."""
        page_size = _integer("page_size", page_size, 1, _SIZE_MAX)
        value = _enum_value(State, state)

        def pages():
            after_id = 0
            while True:
                page = self.list(value, after_id, page_size)
                yield from page
                if len(page) < page_size:
                    return
                after_id = page[-1].id

        return pages()

    # --- Control ----------------------------------------------------------------

    def task(self, task_id: int) -> "TaskSnapshot | None":
        """Task ``task_id`` of this queue as it is now, with its ``result``
        and ``progress``, as a ``TaskSnapshot``; None when the queue has no
        such task (never pushed, or ended and not kept: see
        ``Task.finish``'s ``result``)."""
        task_id = _integer("task_id", task_id, _INT64_MIN, _INT64_MAX)
        out = TASK_P()
        with self._handle as queue:
            status = _check(lib.tq_get_task(queue, task_id, byref(out)))
        return None if status == EMPTY else TaskSnapshot._adopt(out)

    def wait(self, task_id: int, timeout=None, *, cancel=None) -> "TaskSnapshot | None":
        """Waits for task ``task_id`` of this queue to end and returns it as
        it ended, a ``TaskSnapshot``: ``State.DONE`` with its ``result``,
        ``State.DEAD`` or ``State.CANCELLED`` with its ``last_error``. A
        task that has ended already returns at once; None when ``timeout``
        (seconds or a ``timedelta``; None waits as long as it takes) passed
        first. The wait only reads: it wakes when the task ends through this
        process or, through another, by a write that wakes waiting pulls.

        A task it saw not yet ended that then left the store (finished
        without a result on a queue without ``keep_history``, cancelled
        there, or purged) has ended too: it returns as last seen, as
        ``State.DONE`` without a result.

        Ends as ``pull`` does: ``KeyboardInterrupt`` on Ctrl-C (within
        ``WAIT_SLICE``), ``ClosedError`` when the queue is closed from
        another thread, ``tq.Interrupted`` after ``interrupt()`` or when
        ``cancel`` (a ``tq.Cancel``) is triggered. Raises
        ``InvalidArgumentError`` when the queue has no task ``task_id`` or
        it ended without being kept (on a queue without ``keep_history``,
        finish it with a result to wait for it), ``BusyError``, ``IoError``.
        """
        task_id = _integer("task_id", task_id, _INT64_MIN, _INT64_MAX)
        if cancel is not None and not isinstance(cancel, Cancel):
            raise TypeError(f"cancel must be a tq.Cancel, not {type(cancel).__name__}")
        cancel_ptr = None if cancel is None else cancel._ptr
        wait = math.inf if timeout is None else _seconds("timeout", timeout)
        deadline = time.monotonic() + wait
        on_main = threading.current_thread() is threading.main_thread()
        slice_ = WAIT_SLICE if on_main else _OFF_MAIN_WAIT_SLICE
        out = TASK_P()
        while True:
            remaining = max(0.0, deadline - time.monotonic())
            wait_ms = math.ceil(round(min(remaining, slice_) * 1000, 6))
            with self._handle as queue:
                status = lib.tq_wait_task(queue, task_id, wait_ms, cancel_ptr, byref(out))
            if status == errors.Interrupted.status and self._handle.closed:
                raise self._handle.closed_error()
            if _check(status) == OK:
                return TaskSnapshot._adopt(out)
            if time.monotonic() >= deadline:
                return None

    def cancel_task(self, task_id: int, reason=None) -> State:
        """Cancels the task ``task_id`` of this queue, keeping ``reason`` (as
        for ``Task.fail``) as its ``last_error``. A pending, delayed or dead
        task leaves the line at once (kept as ``State.CANCELLED`` with
        ``keep_history``, deleted otherwise): returns ``State.CANCELLED``. A
        leased task is never delivered again and its holder learns of it at
        its next ``extend``, ``finish``, ``fail`` or ``snooze``, which raise
        ``CancelledError``: returns ``State.LEASED``. Cancelling a cancelled
        task again returns the same. Raises ``InvalidArgumentError``,
        changing nothing, when this queue has no task ``task_id`` or the
        task is done."""
        task_id = _integer("task_id", task_id, _INT64_MIN, _INT64_MAX)
        text = _reason(reason)
        out = c_int32()
        with self._handle as queue:
            _check(lib.tq_cancel_task(queue, task_id, text, byref(out)))
        return State(out.value)

    def pause(self, until=UNTIL_RESUMED) -> None:
        """Pauses this queue for every process on its file (or PostgreSQL
        schema) until ``resume()`` or ``until`` (a ``datetime`` or seconds
        since the Unix epoch, in the future): pulls find nothing meanwhile
        (waiting pulls keep waiting and take a task once the pause ends);
        pushes are stored as usual. A new pause replaces the one in force."""
        until_ms = _INT64_MAX if until == UNTIL_RESUMED else _unix_ms(until)
        with self._handle as queue:
            _check(lib.tq_pause(queue, until_ms))

    def resume(self) -> None:
        """Ends this queue's pause, if any, and wakes its waiting pulls in
        every process."""
        with self._handle as queue:
            _check(lib.tq_resume(queue))

    def paused_until(self) -> "float | None":
        """When this queue's pause ends, in seconds since the Unix epoch
        (``tq.UNTIL_RESUMED`` for a pause with no end), or None when it is
        not paused."""
        out = c_int64()
        with self._handle as queue:
            _check(lib.tq_paused_until(queue, byref(out)))
        if out.value == 0:
            return None
        return UNTIL_RESUMED if out.value == _INT64_MAX else out.value / 1000

    def set_concurrency_limit(self, limit) -> None:
        """Limits this queue to ``limit`` tasks leased at once (at least 1)
        across every process and machine on its file (or PostgreSQL schema),
        enforced inside each claim; None removes the limit. Expired leases
        and tasks recovered from dead holders hold no slot."""
        with self._handle as queue:
            if limit is None:
                _check(lib.tq_clear_concurrency_limit(queue))
            else:
                _check(lib.tq_set_concurrency_limit(queue, _integer("limit", limit, 0, 2**32 - 1)))

    def concurrency_limit(self) -> "int | None":
        """This queue's concurrency limit, or None when it has none."""
        out = c_uint32()
        with self._handle as queue:
            _check(lib.tq_concurrency_limit(queue, byref(out)))
        return out.value or None

    def set_rate_limit(self, claims, per) -> None:
        """Allows at most ``claims`` deliveries of this queue in any window
        of ``per`` seconds (or a ``timedelta``), across every process and
        machine on its file (or PostgreSQL schema), without a coordinator:
        a pull finds nothing while the window's claims are spent, and a
        waiting pull waits for the next free slot. ``claims`` None (and any
        ``per``) removes the limit."""
        with self._handle as queue:
            if claims is None:
                _check(lib.tq_clear_rate_limit(queue))
                return
            count = _integer("claims", claims, 0, 2**32 - 1)
            _check(lib.tq_set_rate_limit(queue, count, _milliseconds("per", per)))

    def rate_limit(self) -> "tuple[int, float] | None":
        """This queue's rate limit as ``(claims, per_seconds)``, or None."""
        claims, per_ms = c_uint32(), c_uint64()
        with self._handle as queue:
            _check(lib.tq_rate_limit(queue, byref(claims), byref(per_ms)))
        return (claims.value, per_ms.value / 1000) if claims.value else None

    def retry_dead(self, task_id: int) -> None:
        """Makes the dead task ``task_id`` of this queue pending again, ready
        now, with all its attempts ahead of it. Raises
        ``InvalidArgumentError`` when this queue has no dead task of that id."""
        task_id = _integer("task_id", task_id, _INT64_MIN, _INT64_MAX)
        with self._handle as queue:
            _check(lib.tq_retry_dead(queue, task_id))

    def retry_all_dead(self) -> int:
        """Makes every dead task of this queue pending again, as
        ``retry_dead`` does, and returns how many."""
        out = c_int64()
        with self._handle as queue:
            _check(lib.tq_retry_all_dead(queue, byref(out)))
        return out.value

    def purge(self, older_than=0, state=State.DONE) -> int:
        """Deletes this queue's tasks in ``state`` (``"done"``, the default,
        kept by ``keep_history``; ``"dead"``; or ``"cancelled"``) that got there at least
        ``older_than`` seconds (or a ``timedelta``) ago, all of them for 0,
        and returns how many."""
        value = _enum_value(State, state)
        age = _milliseconds("older_than", older_than)
        out = c_int64()
        with self._handle as queue:
            _check(lib.tq_purge(queue, value, age, byref(out)))
        return out.value

    # --- Schedules --------------------------------------------------------------

    def add_schedule(
        self,
        name: str,
        payload,
        *,
        cron=None,
        every=None,
        time_zone=None,
        priority=None,
        max_attempts=None,
        catch_up=CatchUp.ONE,
        catch_up_limit=1,
    ) -> None:
        """Adds to this queue the schedule ``name``, which enqueues a task of
        ``payload`` (encoded as ``push`` does) at every slot of ``cron`` (a
        cron expression of five fields, or six with seconds first, read in
        ``time_zone``, an IANA name, default UTC) or ``every`` (an interval
        in seconds or a ``timedelta``; the first slot one interval from
        now). Each slot is enqueued exactly once however many processes
        drive the queue's schedules: pulls drive them, and so does
        ``run_due_schedules``. ``priority`` and ``max_attempts`` apply to its
        tasks; ``catch_up`` (a ``tq.CatchUp`` or its name) says what slots
        missed while nothing drove it become, up to ``catch_up_limit`` of
        them for ``CatchUp.EACH``.

        Raises ``InvalidArgumentError`` (a name the queue has, a bad cron
        expression or time zone, named in the message), ``InvalidJSONError``,
        ``BusyError``, ``IoError``; on any error nothing is stored."""
        self._put_schedule(
            lib.tq_schedule_add,
            name,
            payload,
            cron,
            every,
            time_zone,
            priority,
            max_attempts,
            catch_up,
            catch_up_limit,
        )

    def replace_schedule(
        self,
        name: str,
        payload,
        *,
        cron=None,
        every=None,
        time_zone=None,
        priority=None,
        max_attempts=None,
        catch_up=CatchUp.ONE,
        catch_up_limit=1,
    ) -> None:
        """As ``add_schedule``, overwriting a schedule of the same name: its
        next slot is computed afresh and it is no longer paused. A slot
        enqueued before is not enqueued again."""
        self._put_schedule(
            lib.tq_schedule_replace,
            name,
            payload,
            cron,
            every,
            time_zone,
            priority,
            max_attempts,
            catch_up,
            catch_up_limit,
        )

    def upsert_schedule(
        self,
        name: str,
        payload,
        *,
        cron=None,
        every=None,
        time_zone=None,
        priority=None,
        max_attempts=None,
        catch_up=CatchUp.ONE,
        catch_up_limit=1,
    ) -> None:
        """Declares a schedule, as an application does at every start: as
        ``add_schedule``, or an update of the schedule of the same name that
        keeps its next slot while its timing (cron or every, time zone,
        catch-up) is unchanged, so that a restart neither delays an
        interval's slot nor skips a due slot. A changed timing's next slot
        is computed afresh; a paused schedule stays paused."""
        self._put_schedule(
            lib.tq_schedule_upsert,
            name,
            payload,
            cron,
            every,
            time_zone,
            priority,
            max_attempts,
            catch_up,
            catch_up_limit,
        )

    def _put_schedule(
        self, call, name, payload, cron, every, time_zone, priority, max_attempts, catch_up, catch_up_limit
    ):
        if (cron is None) == (every is None):
            raise errors.InvalidArgumentError("give a schedule cron or every, exactly one of them")
        settings = []
        if cron is not None:
            settings.append((lib.tq_schedule_options_set_cron, _c_string("cron", cron)))
        else:
            settings.append((lib.tq_schedule_options_set_every_ms, _milliseconds("every", every)))
        if time_zone is not None:
            settings.append((lib.tq_schedule_options_set_time_zone, _c_string("time_zone", time_zone)))
        if priority is not None:
            settings.append(
                (lib.tq_schedule_options_set_priority, _integer("priority", priority, _INT32_MIN, _INT32_MAX))
            )
        if max_attempts is not None:
            settings.append(
                (
                    lib.tq_schedule_options_set_max_attempts,
                    _integer("max_attempts", max_attempts, 0, _UINT32_MAX),
                )
            )
        settings.append(
            (
                lib.tq_schedule_options_set_catch_up,
                _enum_value(CatchUp, catch_up),
                _integer("catch_up_limit", catch_up_limit, 0, _UINT32_MAX),
            )
        )
        name = _c_string("name", name)
        data = _encode(payload)
        options = _SCHEDULE_OPTIONS.build(settings)
        try:
            with self._handle as queue:
                _check(call(queue, name, data, len(data), options))
        finally:
            _SCHEDULE_OPTIONS.free(options)

    def schedules(self) -> "list[Schedule]":
        """This queue's schedules, by name."""
        listed = []
        after = None
        page = 100
        while True:
            slots = (SCHEDULE_P * page)()
            count = c_size_t()
            with self._handle as queue:
                _check(lib.tq_schedules(queue, after, page, slots, byref(count)))
            pointers = slots[: count.value]
            try:
                listed.extend(_schedule(pointer) for pointer in pointers)
            finally:
                for pointer in pointers:
                    lib.tq_schedule_free(pointer)
            if count.value < page:
                return listed
            after = listed[-1].name.encode("utf-8")

    def remove_schedule(self, name: str) -> None:
        """Deletes the schedule ``name`` of this queue (the tasks it enqueued
        stay); ``InvalidArgumentError`` when there is none."""
        with self._handle as queue:
            _check(lib.tq_schedule_remove(queue, _c_string("name", name)))

    def pause_schedule(self, name: str) -> None:
        """Pauses the schedule ``name``: its slots are skipped until
        ``resume_schedule``; ``InvalidArgumentError`` when there is none."""
        with self._handle as queue:
            _check(lib.tq_schedule_pause(queue, _c_string("name", name)))

    def resume_schedule(self, name: str) -> None:
        """Resumes the schedule ``name`` from its first slot from now on
        (slots that fell while it was paused are skipped)."""
        with self._handle as queue:
            _check(lib.tq_schedule_resume(queue, _c_string("name", name)))

    def run_due_schedules(self) -> int:
        """Enqueues the task of every due slot of this queue's schedules and
        returns how many it stored; safe from any number of processes at
        once. Pulls do this by themselves; call it where nothing pulls."""
        out = c_int64()
        with self._handle as queue:
            _check(lib.tq_run_due_schedules(queue, byref(out)))
        return out.value

    def checkpoint(self) -> int:
        """Copies the file's write-ahead log into the database and truncates
        it, waiting up to the busy timeout for readers to move on, and
        returns the log's size afterwards in bytes. Raises ``BusyError``
        when a reader still used the log (part of it remains). tq also
        checkpoints by itself past 16 MiB; call this at quiet moments."""
        out = c_int64()
        with self._handle as queue:
            _check(lib.tq_checkpoint(queue, byref(out)))
        return out.value

    def wal_size(self) -> int:
        """The size of the file's write-ahead log (``-wal`` file), in bytes."""
        out = c_int64()
        with self._handle as queue:
            _check(lib.tq_wal_size(queue, byref(out)))
        return out.value


def _schedule(ptr) -> Schedule:
    """A listed schedule copied out of the library's object."""
    length = c_size_t()
    address = lib.tq_schedule_payload(ptr, byref(length))
    payload = json.loads(ctypes.string_at(address, length.value)) if address else None
    limit = c_uint32()
    catch_up = CatchUp(lib.tq_schedule_catch_up(ptr, byref(limit)))
    cron = lib.tq_schedule_cron(ptr)
    every_ms = lib.tq_schedule_every_ms(ptr)
    return Schedule(
        name=lib.tq_schedule_name(ptr).decode("utf-8"),
        cron=None if cron is None else cron.decode("utf-8"),
        every=every_ms / 1000 if cron is None else None,
        time_zone=lib.tq_schedule_time_zone(ptr).decode("utf-8"),
        payload=payload,
        priority=lib.tq_schedule_priority(ptr),
        max_attempts=lib.tq_schedule_max_attempts(ptr),
        catch_up=catch_up,
        catch_up_limit=limit.value,
        paused=lib.tq_schedule_paused(ptr),
        next_slot=lib.tq_schedule_next_slot_unix_ms(ptr) / 1000,
    )


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

    Read ``id``, ``attempts``, ``payload`` (``raw`` for the JSON text),
    ``priority``, ``max_attempts``, ``run_at``, ``last_error`` and
    ``state``; end the delivery with ``finish()``, ``fail(reason)`` or
    ``finish_and_pull()``, and keep the lease of a long task with
    ``extend(seconds)``. ``close()`` (or leaving a ``with`` block) frees it
    without finishing it, as does garbage collection: the task is then
    claimed again when its lease runs out or its holder is recovered.
    """

    __slots__ = ("_queue", "_ptr", "_lock", "_ended", "_watch", "__weakref__")

    # Tasks come by the thousand, so the library's task is freed by __del__
    # rather than by a weakref.finalize object per task. A class attribute
    # stays reachable while the interpreter shuts down.
    _free_task = lib.tq_task_free

    def __init__(self, queue: Queue, ptr):
        """Takes ownership of ``ptr`` (from ``tq_pull``); not for direct use."""
        self._ptr = ptr
        self._queue = queue
        self._lock = threading.Lock()
        self._ended = None
        self._watch = None
        self._fields = None
        self._copy(ptr)

    @staticmethod
    def _adopt_all(queue: Queue, pointers) -> "list[Task]":
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


class CancellationWatch:
    """A thread telling a holder of its task's cancellation, from
    ``Task.watch_cancellation``. ``cancelled`` is a ``threading.Event`` set
    once the cancellation is recorded; ``stop()`` (or leaving a ``with``
    block) ends the watch and waits for its thread."""

    __slots__ = ("cancelled", "_task", "_ptr", "_callback", "_cancel", "_stopping", "_thread")

    # How long one wait in the library lasts before the next begins.
    _WAIT_MS = 3_600_000

    def __init__(self, task: Task, ptr, callback):
        self.cancelled = threading.Event()
        self._task = task
        self._ptr = ptr
        self._callback = callback
        self._cancel = Cancel()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"tq-watch-{task.id}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        handle = self._task._queue._handle
        retry_s = _FIRST_RETRY_S
        while True:
            try:
                with handle as queue:
                    status = _check(lib.tq_wait_cancellation(queue, self._ptr, self._WAIT_MS, self._cancel._ptr))
            except errors.CancelledError:
                break
            except (errors.NotHeldError, errors.Interrupted, errors.ClosedError):
                return
            except _TRANSIENT:
                # The task is still held: the watch goes on.
                if self._stopping.wait(retry_s):
                    return
                retry_s = min(2 * retry_s, _MAX_RETRY_S)
                continue
            if status != EMPTY:
                return
            retry_s = _FIRST_RETRY_S
        self.cancelled.set()
        if self._callback is not None:
            self._callback(self._task)

    @property
    def running(self) -> bool:
        """True until the watch ended: told, stopped, or the delivery over."""
        return self._thread.is_alive()

    def join(self, timeout=None) -> bool:
        """Waits up to ``timeout`` seconds (None: no limit) for the watch to
        end on its own; returns whether it ended."""
        self._thread.join(timeout)
        return not self.running

    def stop(self) -> None:
        """Ends the watch and waits for its thread (unless called from its
        own callback). Idempotent."""
        self._stopping.set()
        self._cancel.trigger()
        if threading.current_thread() is not self._thread:
            self._thread.join()

    def __enter__(self) -> "CancellationWatch":
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()


class Item:
    """One task of ``Queue.push_items``: its payload (as ``push`` takes it)
    and the options of ``push``, plus ``after_items``, the indexes of
    earlier items of the same call that it waits for."""

    __slots__ = ("_options", "payload")

    def __init__(
        self,
        payload,
        *,
        delay=None,
        run_at=None,
        priority=None,
        max_attempts=None,
        unique_key=None,
        unique_for=None,
        after=(),
        after_items=(),
        run_anyway=False,
        group=None,
        group_max=None,
    ):
        self.payload = payload
        self._options = (
            delay,
            run_at,
            priority,
            max_attempts,
            unique_key,
            unique_for,
            tuple(after),
            tuple(after_items),
            run_anyway,
            group,
            group_max,
        )

    def _settings(self):
        return _push_settings(*self._options)


class TaskSnapshot(_TaskFields):
    """A task as ``Queue.list``, ``Queue.task`` or ``Queue.wait`` read it:
    the same read-only fields as a ``Task`` (``id``, ``attempts``,
    ``payload``, ``raw``, ``priority``, ``max_attempts``, ``run_at``,
    ``last_error``, ``state``), and its ``result`` and ``progress``, copied
    out of the library. A snapshot is not held: it cannot be finished or
    failed."""

    __slots__ = ("_raw_result", "_raw_progress", "_result", "_progress")

    def __init__(self, ptr):
        """Copies the task at ``ptr``, which stays the caller's; not for
        direct use."""
        self._copy(ptr)
        self._fields = _read_fields(ptr)
        self._raw_result = lib.tq_task_result(ptr)
        self._raw_progress = lib.tq_task_progress(ptr)
        self._result = self._progress = _NOT_PARSED

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

    def __repr__(self) -> str:
        return (
            f"<tq.TaskSnapshot id={self.id} state={self.state.name.lower()} "
            f"attempts={self.attempts} raw={self.raw[:60]!r}>"
        )
