"""Looking after a queue: counting and listing its tasks, reading and
waiting for one, cancelling, pausing, limiting claims, retrying dead tasks,
purging, and the write-ahead log. The methods of ``Queue`` that answer
these, defined here and inherited by it."""

import math
import threading
import time
from ctypes import byref, c_double, c_int32, c_int64, c_size_t, c_uint32, c_uint64

from . import errors
from ._limits import _INT64_MAX, _INT64_MIN, _OFF_MAIN_WAIT_SLICE, _SIZE_MAX, EMPTY, OK, WAIT_SLICE, _check
from ._native import TASK_P, lib
from .options import _c_string, _enum_value, _integer, _json_text, _milliseconds, _reason, _seconds, _unix_ms
from .task import State, TaskSnapshot, _event_key, _step_name
from .watch import Cancel

#: What ``Queue.paused_until`` returns for a pause with no end, and what
#: ``Queue.pause`` takes for one (the default).
UNTIL_RESUMED = float("inf")


class _Admin:
    """The methods of ``Queue`` that look after it; ``Queue`` inherits them."""

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

    def set_max_pending(self, cap) -> None:
        """Caps this queue at ``cap`` pending tasks (ready, delayed, waiting
        for other tasks or a retry; leased ones do not count), for every
        process and machine on its file (or PostgreSQL schema); None or 0
        removes the cap. A push beyond it stores nothing and raises ``FullError``
        (a batch: none of it), unless its ``wait_for_room`` lets it wait; a
        push finding its unique key held is never refused. Setting a cap
        removes no task."""
        with self._handle as queue:
            _check(lib.tq_set_max_pending(queue, _integer("cap", cap or 0, 0, 2**64 - 1)))

    def max_pending(self) -> "int | None":
        """This queue's cap on pending tasks, or None when it has none."""
        out = c_uint64()
        with self._handle as queue:
            _check(lib.tq_max_pending(queue, byref(out)))
        return out.value or None

    def set_max_pending_per_key(self, cap) -> None:
        """Caps each fairness key of this queue at ``cap`` pending tasks
        (counted as ``set_max_pending`` counts them), unless the key has a
        cap of its own (``set_key_max_pending``); None or 0 removes this
        default. A push beyond its key's cap stores nothing and raises
        ``FullError`` (a batch: none of it), unless its ``wait_for_room``
        lets it wait; other keys are not affected. Makes the queue fair.
        SQLite only."""
        with self._handle as queue:
            _check(lib.tq_set_max_pending_per_key(queue, _integer("cap", cap or 0, 0, 2**64 - 1)))

    def max_pending_per_key(self) -> "int | None":
        """The default cap on each fairness key's pending tasks, or None."""
        out = c_uint64()
        with self._handle as queue:
            _check(lib.tq_max_pending_per_key(queue, byref(out)))
        return out.value or None

    def set_key_max_pending(self, key, cap) -> None:
        """Caps fairness key ``key`` (``""``: the tasks pushed without one)
        at ``cap`` pending tasks, in place of the default of
        ``set_max_pending_per_key``; None or 0 removes the key's own cap,
        so that the default applies to it again. SQLite only."""
        with self._handle as queue:
            _check(
                lib.tq_set_key_max_pending(
                    queue, _c_string("key", key), _integer("cap", cap or 0, 0, 2**64 - 1)
                )
            )

    def key_max_pending(self, key) -> "int | None":
        """The cap in force for fairness key ``key``: its own, else the
        queue's default for every key; None when neither is set."""
        out = c_uint64()
        with self._handle as queue:
            _check(lib.tq_key_max_pending(queue, _c_string("key", key), byref(out)))
        return out.value or None

    def set_fair_weight(self, key, weight) -> None:
        """Sets the weight of fairness key ``key`` of this queue (``""``:
        the tasks pushed without one), 0.001 to 1,000,000, default 1: among
        the keys with ready tasks, each gets deliveries in proportion to its
        weight (see ``push(fair_key=...)``). SQLite only."""
        if not isinstance(weight, (int, float)) or isinstance(weight, bool):
            raise TypeError(f"weight must be a number, not {type(weight).__name__}")
        with self._handle as queue:
            _check(lib.tq_set_fair_weight(queue, _c_string("key", key), float(weight)))

    def fair_weight(self, key) -> float:
        """The weight of fairness key ``key`` of this queue: 1 unless set."""
        out = c_double()
        with self._handle as queue:
            _check(lib.tq_fair_weight(queue, _c_string("key", key), byref(out)))
        return out.value

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

    def clear_steps_after(self, task_id: int, name: str) -> int:
        """Deletes the steps of task ``task_id`` recorded after its step
        ``name`` (``Task.step``), so that its next delivery runs them again,
        and returns how many: "retry from step ``name``". ``retry_dead``
        keeps every step, so clear first. Raises ``InvalidArgumentError``,
        changing nothing, when this queue has no such task, a worker holds
        it, or it has no step ``name``."""
        task_id = _integer("task_id", task_id, _INT64_MIN, _INT64_MAX)
        out = c_uint64()
        with self._handle as queue:
            _check(lib.tq_clear_steps_after(queue, task_id, _step_name(name), byref(out)))
        return out.value

    def signal(self, key: str, payload, retention=None) -> "int | None":
        """Sends an event under ``key`` with ``payload`` (taken as ``push``
        takes one), in one commit, and returns the id of the task that took
        it: when tasks of this queue wait for ``key`` (``Task.wait_for``),
        the one that has waited longest takes it and is ready at once; the
        others keep waiting for the next event. Otherwise the event is kept
        for ``retention`` seconds (or a ``timedelta``; None: 7 days), behind
        any other kept under ``key``, and None is returned: waits take them
        in the order they were sent, one each. Raises
        ``InvalidJSONError`` or ``InvalidArgumentError``, storing nothing,
        for bad input."""
        encoded = _event_key(key)
        text = _json_text("event's payload", payload)
        retention_ms = 0 if retention is None else max(1, _milliseconds("retention", retention))
        out = c_int64()
        with self._handle as queue:
            _check(lib.tq_signal(queue, encoded, text, retention_ms, byref(out)))
        return out.value or None

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
