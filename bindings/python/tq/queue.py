"""``Queue``: a handle on one queue, the first of libtq's objects in Python
(``Task`` and ``TaskSnapshot`` are in task.py, ``Cancel`` in watch.py).

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

import math
import re
import threading
import time
import weakref
from ctypes import byref, c_char_p, c_int32, c_int64, c_size_t
from typing import NamedTuple

from . import errors
from ._limits import _INT32_MAX, _OFF_MAIN_WAIT_SLICE, _SIZE_MAX, _UINT32_MAX, MERGED, OK, WAIT_SLICE, _check
from ._native import PUSH_OPTIONS_P, QUEUE_P, TASK_P, lib
from ._work import _MIN_LEASE_S, WorkStats, Worker
from .admin import _Admin
from .options import (
    _OPEN_OPTIONS,
    _PULL_OPTIONS,
    _PUSH_OPTIONS,
    Durability,
    _c_string,
    _encode,
    _enum_value,
    _integer,
    _milliseconds,
    _path_bytes,
    _push_settings,
    _redacted,
    _seconds,
)
from .schedule import _Schedules
from .task import Task
from .watch import Cancel

# tq_push_batch names the payload that failed the batch at the start of its
# message.
_PAYLOAD_INDEX = re.compile(r"payload (\d+): ")

# tq_push_items names the item that failed at the start of its message.
_ITEM_INDEX = re.compile(r"item (\d+): ")

# Why a delivery is no longer held, when the library does not say.
_LOST = "finished, recovered or taken by another worker"


class Pushed(NamedTuple):
    """What ``Queue.push_unique`` returns: the task's id, and whether this
    push stored it (False: a task holding the key already existed, and
    ``id`` is that task's). ``merged``, not one of the tuple's fields, says
    whether that task took this push's payload or run time
    (``replace_pending``, ``debounce``); it is False when the task was left
    as it was (it was being delivered, or neither was asked)."""

    id: int
    created: bool
    merged = False


class _Merged(Pushed):
    """A ``Pushed`` whose task took the push (``TQ_MERGED``)."""

    __slots__ = ()
    merged = True

    def __repr__(self):
        return f"Pushed(id={self.id}, created=False, merged=True)"


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


class Queue(_Admin, _Schedules):
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
        expire_after=None,
        expire_at=None,
        deadline_after=None,
        deadline_at=None,
        wait_for_room=None,
        replace_pending=False,
        debounce=None,
        fair_key=None,
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
        - ``expire_after`` (seconds or a ``timedelta``) or ``expire_at`` (a
          ``datetime`` or seconds since the Unix epoch): the task's first
          delivery never starts once that time has passed; a pull that
          meets it then ends it as dead with ``last_error`` "expired".
        - ``deadline_after`` or ``deadline_at``: no delivery, first or
          retry, starts once that time has passed (a pull ends the task as
          dead with "deadline passed"; a failure whose retry would fall
          after it ends it so at once). A delivery running when it passes
          runs to its end. A push whose run time is not before its expiry
          or deadline is refused: it could never run.
        - ``wait_for_room`` (seconds or a ``timedelta``): when the queue is
          at its cap on pending tasks (``set_max_pending``), wait up to that
          long for room instead of raising ``FullError`` at once.
        - ``replace_pending=True`` (with ``unique_key``): a pending task
          holding the key (ready, delayed, waiting for a retry or for other
          tasks, but not being delivered) takes this push's payload, and
          its id is returned. A task being delivered is never changed.
        - ``debounce`` (seconds or a ``timedelta``, with ``unique_key``):
          a pending holder's run time moves to this push's own (now plus
          ``delay``, or ``run_at``), but never later than ``debounce``
          after the holder was first pushed: a burst of pushes runs the task
          once, a delay after the last. Both refuse ``after`` and ``group``.
        - ``fair_key`` (a ``str``): the task's fairness key, a tenant say.
          Once a queue has one, its pulls share their deliveries between
          the keys with ready tasks in proportion to their weights
          (``set_fair_weight``, default 1); tasks without a key share the
          key ``""``. SQLite only.

        Raises ``InvalidJSONError``, ``InvalidArgumentError`` (bad UTF-8,
        over the payload limit, an option out of range), ``FullError`` (the
        queue is at its cap; nothing was stored), ``Interrupted`` (a wait
        for room ended by ``interrupt``), ``BusyError``, ``IoError``.
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
            and expire_after is None
            and expire_at is None
            and deadline_after is None
            and deadline_at is None
            and wait_for_room is None
            and not replace_pending
            and debounce is None
            and fair_key is None
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
            expire_after=expire_after,
            expire_at=expire_at,
            deadline_after=deadline_after,
            deadline_at=deadline_at,
            wait_for_room=wait_for_room,
            replace_pending=replace_pending,
            debounce=debounce,
            fair_key=fair_key,
        )
        self._push_with(data, settings, out)
        return out.value

    def push_unique(
        self,
        obj,
        unique_key,
        *,
        unique_for=None,
        delay=None,
        run_at=None,
        priority=None,
        max_attempts=None,
        replace_pending=False,
        debounce=None,
    ) -> Pushed:
        """Pushes ``obj`` with the unique key ``unique_key`` (see ``push``) and
        returns ``Pushed(id, created)``: ``created`` is False when a task of
        this queue already held the key, no task was stored, and ``id`` is
        that task's (which took this push's payload or run time if it was
        pending and ``replace_pending`` or ``debounce`` asked)."""
        if not isinstance(unique_key, str):
            raise TypeError(f"unique_key must be a str, not {type(unique_key).__name__}")
        data = _encode(obj)
        settings = _push_settings(
            delay,
            run_at,
            priority,
            max_attempts,
            unique_key,
            unique_for,
            replace_pending=replace_pending,
            debounce=debounce,
        )
        out = c_int64()
        status = self._push_with(data, settings, out)
        if status == MERGED:
            return _Merged(out.value, False)
        return Pushed(out.value, status == OK)

    def _push_with(self, data, settings, out) -> int:
        """tq_push with push options built from ``settings``; returns the status."""
        options = _PUSH_OPTIONS.build(settings)
        try:
            with self._handle as queue:
                return _check(lib.tq_push(queue, data, len(data), options, byref(out)))
        finally:
            _PUSH_OPTIONS.free(options)

    def push_many(
        self,
        objs,
        *,
        delay=None,
        run_at=None,
        priority=None,
        max_attempts=None,
        group=None,
        group_max=None,
        wait_for_room=None,
        fair_key=None,
    ) -> "list[int]":
        """Stores every payload of ``objs`` (an iterable, each as ``push``
        takes it) as a task, in order, in one transaction, and returns their
        ids: all of them or none.

        A payload that fails stores nothing and raises with its position in
        ``error.index`` (and in the message): ``InvalidJSONError``,
        ``InvalidArgumentError``, or the ``TypeError`` or ``ValueError`` of
        ``json.dumps``. The options apply to every task; a unique key names
        one task, so ``push_many`` takes none. A queue at its cap refuses
        the whole batch with ``FullError`` unless all of it fits (within
        ``wait_for_room``, as ``push``). Also raises ``BusyError``,
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
        settings = _push_settings(
            delay,
            run_at,
            priority,
            max_attempts,
            group=group,
            group_max=group_max,
            wait_for_room=wait_for_room,
            fair_key=fair_key,
        )
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
        for task in tasks:
            if not isinstance(task, Task):
                raise TypeError(f"{caller} takes tq.Task objects, not {type(task).__name__}")
        # Each task's lock, taken in one order so that two calls cannot deadlock.
        ordered = tasks if len(tasks) < 2 else [*{id(task): task for task in sorted(tasks, key=id)}.values()]
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
