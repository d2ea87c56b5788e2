"""Schedules: ``CatchUp``, ``Schedule`` as listed, and the methods of
``Queue`` that add, replace, upsert, list, remove, pause, resume and run
them, defined here and inherited by it."""

import ctypes
import enum
import json
from ctypes import byref, c_int64, c_size_t, c_uint32
from typing import NamedTuple

from . import errors
from ._limits import _INT32_MAX, _INT32_MIN, _UINT32_MAX, _check
from ._native import SCHEDULE_P, lib
from .options import _SCHEDULE_OPTIONS, _c_string, _encode, _enum_value, _integer, _milliseconds


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


class _Schedules:
    """The methods of ``Queue`` for its schedules; ``Queue`` inherits them."""

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
