"""Loads libtq and declares the C functions of include/tq.h for ctypes.

Every function the header declares is listed in ``PROTOTYPES`` with its
argument and result types; nothing else in the package touches ctypes
declarations. The opaque C types are empty ``Structure`` subclasses, so a
``tq_task *`` can never be passed where a ``tq_queue *`` is expected.
"""

import ctypes
import os
from ctypes import POINTER, c_bool, c_char_p, c_double, c_int, c_int32, c_int64, c_size_t, c_uint32, c_uint64, c_void_p
from pathlib import Path

#: The environment variable naming the library to load.
LIBRARY_ENV = "TQ_LIBRARY"
#: Where the package's own build (setup.py, run by pip) places the libtq it
#: builds with cargo.
BUNDLED_LIBRARY = Path(__file__).resolve().with_name("libtq.so")
#: The name the dynamic loader looks for on the system search path: the
#: shared library's SONAME, which carries the ABI version.
SONAME = "libtq.so.0.3"
#: The ABI this package is written for: major and minor version of libtq
#: (before 1.0 a minor release may change the ABI, so both must match).
ABI_VERSION = (0, 3)


class tq_queue(ctypes.Structure):
    """Opaque: a handle on one queue file."""


class tq_task(ctypes.Structure):
    """Opaque: one delivery of one task."""


class tq_options(ctypes.Structure):
    """Opaque: options for tq_open."""


class tq_push_options(ctypes.Structure):
    """Opaque: options for tq_push."""


class tq_pull_options(ctypes.Structure):
    """Opaque: options for tq_pull."""


class tq_cancel(ctypes.Structure):
    """Opaque: ends the wait of the pulls whose options hold it."""


class tq_schedule_options(ctypes.Structure):
    """Opaque: what tq_schedule_add stores besides a schedule's name and payload."""


class tq_schedule(ctypes.Structure):
    """Opaque: a schedule listed by tq_schedules."""


QUEUE_P = POINTER(tq_queue)
TASK_P = POINTER(tq_task)
OPTIONS_P = POINTER(tq_options)
PUSH_OPTIONS_P = POINTER(tq_push_options)
PULL_OPTIONS_P = POINTER(tq_pull_options)
CANCEL_P = POINTER(tq_cancel)
SCHEDULE_OPTIONS_P = POINTER(tq_schedule_options)
SCHEDULE_P = POINTER(tq_schedule)

# enum tq_status is returned as a C int; statuses, durabilities and states
# are passed as int32_t.
STATUS = c_int

#: name: (result type, argument types), one entry per function of tq.h.
PROTOTYPES = {
    "tq_last_error": (c_char_p, []),
    "tq_status_str": (c_char_p, [c_int32]),
    "tq_version": (c_char_p, []),
    "tq_version_number": (c_uint32, []),
    "tq_location_redacted": (STATUS, [c_char_p, c_char_p, c_size_t, POINTER(c_size_t)]),
    "tq_options_new": (OPTIONS_P, []),
    "tq_options_free": (None, [OPTIONS_P]),
    "tq_options_set_durability": (STATUS, [OPTIONS_P, c_int32]),
    "tq_options_set_busy_timeout_ms": (STATUS, [OPTIONS_P, c_uint64]),
    "tq_options_set_keep_history": (STATUS, [OPTIONS_P, c_bool]),
    "tq_options_set_result_retention_ms": (STATUS, [OPTIONS_P, c_uint64]),
    "tq_options_set_max_payload_len": (STATUS, [OPTIONS_P, c_size_t]),
    "tq_options_set_queue": (STATUS, [OPTIONS_P, c_char_p]),
    "tq_options_set_pool_size": (STATUS, [OPTIONS_P, c_uint32]),
    "tq_options_set_postgres_schema": (STATUS, [OPTIONS_P, c_char_p]),
    "tq_options_set_max_attempts": (STATUS, [OPTIONS_P, c_uint32]),
    "tq_options_set_retry_backoff_ms": (STATUS, [OPTIONS_P, c_uint64, c_uint64]),
    "tq_push_options_new": (PUSH_OPTIONS_P, []),
    "tq_push_options_free": (None, [PUSH_OPTIONS_P]),
    "tq_push_options_set_delay_ms": (STATUS, [PUSH_OPTIONS_P, c_uint64]),
    "tq_push_options_set_run_at_unix_ms": (STATUS, [PUSH_OPTIONS_P, c_int64]),
    "tq_push_options_set_expire_after_ms": (STATUS, [PUSH_OPTIONS_P, c_uint64]),
    "tq_push_options_set_expire_at_unix_ms": (STATUS, [PUSH_OPTIONS_P, c_int64]),
    "tq_push_options_set_deadline_after_ms": (STATUS, [PUSH_OPTIONS_P, c_uint64]),
    "tq_push_options_set_deadline_unix_ms": (STATUS, [PUSH_OPTIONS_P, c_int64]),
    "tq_push_options_set_priority": (STATUS, [PUSH_OPTIONS_P, c_int32]),
    "tq_push_options_set_wait_for_room_ms": (STATUS, [PUSH_OPTIONS_P, c_uint64]),
    "tq_push_options_set_max_attempts": (STATUS, [PUSH_OPTIONS_P, c_uint32]),
    "tq_push_options_set_unique_key": (STATUS, [PUSH_OPTIONS_P, c_char_p]),
    "tq_push_options_set_group": (STATUS, [PUSH_OPTIONS_P, c_char_p, c_uint32]),
    "tq_push_options_set_fair_key": (STATUS, [PUSH_OPTIONS_P, c_char_p]),
    "tq_push_options_set_unique_for_ms": (STATUS, [PUSH_OPTIONS_P, c_uint64]),
    "tq_push_options_set_replace_pending": (STATUS, [PUSH_OPTIONS_P, c_bool]),
    "tq_push_options_set_debounce_ms": (STATUS, [PUSH_OPTIONS_P, c_uint64]),
    "tq_push_options_add_after": (STATUS, [PUSH_OPTIONS_P, c_int64]),
    "tq_push_options_add_after_item": (STATUS, [PUSH_OPTIONS_P, c_size_t]),
    "tq_push_options_set_on_parent_failure": (STATUS, [PUSH_OPTIONS_P, c_int32]),
    "tq_pull_options_new": (PULL_OPTIONS_P, []),
    "tq_pull_options_free": (None, [PULL_OPTIONS_P]),
    "tq_pull_options_set_lease_ms": (STATUS, [PULL_OPTIONS_P, c_uint64]),
    "tq_pull_options_set_wait_ms": (STATUS, [PULL_OPTIONS_P, c_uint64]),
    "tq_pull_options_set_cancel": (STATUS, [PULL_OPTIONS_P, CANCEL_P]),
    "tq_cancel_new": (CANCEL_P, []),
    "tq_cancel_trigger": (STATUS, [CANCEL_P]),
    "tq_cancel_free": (None, [CANCEL_P]),
    "tq_open": (STATUS, [c_char_p, OPTIONS_P, POINTER(QUEUE_P)]),
    "tq_close": (None, [QUEUE_P]),
    "tq_interrupt": (STATUS, [QUEUE_P]),
    "tq_push": (STATUS, [QUEUE_P, c_char_p, c_size_t, PUSH_OPTIONS_P, POINTER(c_int64)]),
    "tq_push_batch": (
        STATUS,
        [QUEUE_P, POINTER(c_char_p), POINTER(c_size_t), c_size_t, PUSH_OPTIONS_P, POINTER(c_int64)],
    ),
    "tq_push_items": (
        STATUS,
        [QUEUE_P, POINTER(c_char_p), POINTER(c_size_t), POINTER(PUSH_OPTIONS_P), c_size_t, POINTER(c_int64)],
    ),
    "tq_pull": (STATUS, [QUEUE_P, PULL_OPTIONS_P, POINTER(TASK_P)]),
    "tq_pull_batch": (STATUS, [QUEUE_P, PULL_OPTIONS_P, c_size_t, POINTER(TASK_P), POINTER(c_size_t)]),
    "tq_task_id": (c_int64, [TASK_P]),
    "tq_task_token": (c_int64, [TASK_P]),
    # c_void_p, not c_char_p: the payload is copied with its exact length by
    # ctypes.string_at, instead of up to the first NUL.
    "tq_task_payload": (c_void_p, [TASK_P, POINTER(c_size_t)]),
    "tq_task_attempts": (c_uint32, [TASK_P]),
    "tq_task_priority": (c_int32, [TASK_P]),
    "tq_task_max_attempts": (c_uint32, [TASK_P]),
    "tq_task_run_at_unix_ms": (c_int64, [TASK_P]),
    "tq_task_expires_at_unix_ms": (c_int64, [TASK_P]),
    "tq_task_deadline_unix_ms": (c_int64, [TASK_P]),
    "tq_task_state": (c_int32, [TASK_P]),
    "tq_task_last_error": (c_char_p, [TASK_P]),
    "tq_task_result": (c_char_p, [TASK_P]),
    "tq_task_progress": (c_char_p, [TASK_P]),
    "tq_task_group": (c_char_p, [TASK_P]),
    "tq_task_parents": (POINTER(c_int64), [TASK_P, POINTER(c_size_t)]),
    "tq_task_waiting_for": (POINTER(c_int64), [TASK_P, POINTER(c_size_t)]),
    "tq_task_step_count": (c_size_t, [TASK_P]),
    "tq_task_step_name": (c_char_p, [TASK_P, c_size_t]),
    "tq_task_step_output": (c_char_p, [TASK_P, c_size_t]),
    "tq_task_step_recorded_at_unix_ms": (c_int64, [TASK_P, c_size_t]),
    "tq_task_attempt_count": (c_size_t, [TASK_P]),
    "tq_task_attempt_number": (c_uint32, [TASK_P, c_size_t]),
    "tq_task_attempt_outcome": (c_int32, [TASK_P, c_size_t]),
    "tq_task_attempt_reason": (c_char_p, [TASK_P, c_size_t]),
    "tq_task_attempt_holder_id": (c_int64, [TASK_P, c_size_t]),
    "tq_task_attempt_holder_pid": (c_int64, [TASK_P, c_size_t]),
    "tq_task_attempt_started_at_unix_ms": (c_int64, [TASK_P, c_size_t]),
    "tq_task_attempt_ended_at_unix_ms": (c_int64, [TASK_P, c_size_t]),
    "tq_task_free": (None, [TASK_P]),
    "tq_finish": (STATUS, [QUEUE_P, TASK_P]),
    "tq_finish_and_pull": (STATUS, [QUEUE_P, TASK_P, PULL_OPTIONS_P, POINTER(TASK_P)]),
    "tq_finish_batch": (STATUS, [QUEUE_P, POINTER(TASK_P), c_size_t, POINTER(c_int32)]),
    "tq_finish_and_pull_batch": (
        STATUS,
        [QUEUE_P, POINTER(TASK_P), c_size_t, POINTER(c_int32), PULL_OPTIONS_P, c_size_t, POINTER(TASK_P), POINTER(c_size_t)],
    ),
    "tq_finish_with_result": (STATUS, [QUEUE_P, TASK_P, c_char_p]),
    "tq_get_task": (STATUS, [QUEUE_P, c_int64, POINTER(TASK_P)]),
    "tq_wait_task": (STATUS, [QUEUE_P, c_int64, c_uint64, CANCEL_P, POINTER(TASK_P)]),
    "tq_fail": (STATUS, [QUEUE_P, TASK_P, c_char_p]),
    "tq_extend": (STATUS, [QUEUE_P, TASK_P, c_uint64]),
    "tq_wait_cancellation": (STATUS, [QUEUE_P, TASK_P, c_uint64, CANCEL_P]),
    "tq_wait_change": (STATUS, [QUEUE_P, c_uint64, c_uint64, CANCEL_P, POINTER(c_uint64)]),
    "tq_extend_with_progress": (STATUS, [QUEUE_P, TASK_P, c_uint64, c_char_p]),
    "tq_step_put": (STATUS, [QUEUE_P, TASK_P, c_char_p, c_char_p]),
    # The output is read through a void pointer: a c_char_p result would be
    # copied into bytes, losing the pointer tq_string_free needs.
    "tq_step_get": (STATUS, [QUEUE_P, TASK_P, c_char_p, POINTER(c_void_p)]),
    "tq_string_free": (None, [c_void_p]),
    "tq_clear_steps_after": (STATUS, [QUEUE_P, c_int64, c_char_p, POINTER(c_uint64)]),
    "tq_snooze": (STATUS, [QUEUE_P, TASK_P, c_uint64]),
    "tq_signal": (STATUS, [QUEUE_P, c_char_p, c_char_p, c_uint64, POINTER(c_int64)]),
    # The payload is read through a void pointer, as tq_step_get's output.
    "tq_wait_for_event": (STATUS, [QUEUE_P, TASK_P, c_char_p, c_uint64, POINTER(c_void_p)]),
    "tq_sleep": (STATUS, [QUEUE_P, TASK_P, c_char_p, c_uint64]),
    "tq_sleep_until": (STATUS, [QUEUE_P, TASK_P, c_char_p, c_int64]),
    "tq_cancel_task": (STATUS, [QUEUE_P, c_int64, c_char_p, POINTER(c_int32)]),
    "tq_pause": (STATUS, [QUEUE_P, c_int64]),
    "tq_resume": (STATUS, [QUEUE_P]),
    "tq_paused_until": (STATUS, [QUEUE_P, POINTER(c_int64)]),
    "tq_set_concurrency_limit": (STATUS, [QUEUE_P, c_uint32]),
    "tq_clear_concurrency_limit": (STATUS, [QUEUE_P]),
    "tq_concurrency_limit": (STATUS, [QUEUE_P, POINTER(c_uint32)]),
    "tq_set_max_pending": (STATUS, [QUEUE_P, c_uint64]),
    "tq_max_pending": (STATUS, [QUEUE_P, POINTER(c_uint64)]),
    "tq_set_max_pending_per_key": (STATUS, [QUEUE_P, c_uint64]),
    "tq_max_pending_per_key": (STATUS, [QUEUE_P, POINTER(c_uint64)]),
    "tq_set_key_max_pending": (STATUS, [QUEUE_P, c_char_p, c_uint64]),
    "tq_key_max_pending": (STATUS, [QUEUE_P, c_char_p, POINTER(c_uint64)]),
    "tq_set_fair_weight": (STATUS, [QUEUE_P, c_char_p, c_double]),
    "tq_fair_weight": (STATUS, [QUEUE_P, c_char_p, POINTER(c_double)]),
    "tq_set_rate_limit": (STATUS, [QUEUE_P, c_uint32, c_uint64]),
    "tq_clear_rate_limit": (STATUS, [QUEUE_P]),
    "tq_rate_limit": (STATUS, [QUEUE_P, POINTER(c_uint32), POINTER(c_uint64)]),
    "tq_recover": (STATUS, [QUEUE_P, POINTER(c_int64)]),
    "tq_count": (STATUS, [QUEUE_P, c_int32, POINTER(c_int64)]),
    "tq_oldest_ready_age_ms": (STATUS, [QUEUE_P, POINTER(c_int64)]),
    "tq_groups_waiting": (STATUS, [QUEUE_P, POINTER(c_int64)]),
    "tq_list": (STATUS, [QUEUE_P, c_int32, c_int64, c_size_t, POINTER(TASK_P), POINTER(c_size_t)]),
    "tq_retry_dead": (STATUS, [QUEUE_P, c_int64]),
    "tq_retry_all_dead": (STATUS, [QUEUE_P, POINTER(c_int64)]),
    "tq_purge": (STATUS, [QUEUE_P, c_int32, c_uint64, POINTER(c_int64)]),
    "tq_checkpoint": (STATUS, [QUEUE_P, POINTER(c_int64)]),
    "tq_wal_size": (STATUS, [QUEUE_P, POINTER(c_int64)]),
    "tq_schedule_options_new": (SCHEDULE_OPTIONS_P, []),
    "tq_schedule_options_free": (None, [SCHEDULE_OPTIONS_P]),
    "tq_schedule_options_set_cron": (STATUS, [SCHEDULE_OPTIONS_P, c_char_p]),
    "tq_schedule_options_set_every_ms": (STATUS, [SCHEDULE_OPTIONS_P, c_uint64]),
    "tq_schedule_options_set_time_zone": (STATUS, [SCHEDULE_OPTIONS_P, c_char_p]),
    "tq_schedule_options_set_priority": (STATUS, [SCHEDULE_OPTIONS_P, c_int32]),
    "tq_schedule_options_set_max_attempts": (STATUS, [SCHEDULE_OPTIONS_P, c_uint32]),
    "tq_schedule_options_set_catch_up": (STATUS, [SCHEDULE_OPTIONS_P, c_int32, c_uint32]),
    "tq_schedule_add": (STATUS, [QUEUE_P, c_char_p, c_char_p, c_size_t, SCHEDULE_OPTIONS_P]),
    "tq_schedule_replace": (STATUS, [QUEUE_P, c_char_p, c_char_p, c_size_t, SCHEDULE_OPTIONS_P]),
    "tq_schedule_upsert": (STATUS, [QUEUE_P, c_char_p, c_char_p, c_size_t, SCHEDULE_OPTIONS_P]),
    "tq_schedule_remove": (STATUS, [QUEUE_P, c_char_p]),
    "tq_schedule_pause": (STATUS, [QUEUE_P, c_char_p]),
    "tq_schedule_resume": (STATUS, [QUEUE_P, c_char_p]),
    "tq_run_due_schedules": (STATUS, [QUEUE_P, POINTER(c_int64)]),
    "tq_schedules": (STATUS, [QUEUE_P, c_char_p, c_size_t, POINTER(SCHEDULE_P), POINTER(c_size_t)]),
    "tq_schedule_free": (None, [SCHEDULE_P]),
    "tq_schedule_name": (c_char_p, [SCHEDULE_P]),
    "tq_schedule_cron": (c_char_p, [SCHEDULE_P]),
    "tq_schedule_every_ms": (c_uint64, [SCHEDULE_P]),
    "tq_schedule_time_zone": (c_char_p, [SCHEDULE_P]),
    # c_void_p, as for tq_task_payload: copied by length.
    "tq_schedule_payload": (c_void_p, [SCHEDULE_P, POINTER(c_size_t)]),
    "tq_schedule_priority": (c_int32, [SCHEDULE_P]),
    "tq_schedule_max_attempts": (c_uint32, [SCHEDULE_P]),
    "tq_schedule_catch_up": (c_int32, [SCHEDULE_P, POINTER(c_uint32)]),
    "tq_schedule_paused": (c_bool, [SCHEDULE_P]),
    "tq_schedule_next_slot_unix_ms": (c_int64, [SCHEDULE_P]),
}

#: The header's limits and defaults (#define constants, which a shared
#: library does not export), checked against include/tq.h by the tests.
MAX_PAYLOAD_LEN = 1_000_000_000
MAX_QUEUE_NAME_LEN = 128
MAX_UNIQUE_KEY_LEN = 1024
MAX_REASON_LEN = 64 * 1024
DEFAULT_MAX_ATTEMPTS = 25
DEFAULT_POOL_SIZE = 4
MAX_POOL_SIZE = 1024
MAX_GROUP_AT_ONCE = 1000
ATTEMPTS_KEPT = 20


def _open_library():
    """Returns (CDLL, where it came from), trying the three places in order."""
    places = (
        f"the {LIBRARY_ENV} environment variable",
        f"the copy inside the package ({BUNDLED_LIBRARY})",
        f"the system's library search path ({SONAME})",
    )
    named = os.environ.get(LIBRARY_ENV)
    if named:
        # A library named explicitly is never silently replaced by another.
        try:
            return ctypes.CDLL(named), named
        except OSError as error:
            raise ImportError(
                f"tq: cannot load libtq from {LIBRARY_ENV}={named!r}: {error}. "
                f"Unset {LIBRARY_ENV} to use {places[1]} or {places[2]}."
            ) from None
    reasons = [f"{places[0]}: not set"]
    if BUNDLED_LIBRARY.exists():
        try:
            return ctypes.CDLL(str(BUNDLED_LIBRARY)), str(BUNDLED_LIBRARY)
        except OSError as error:
            reasons.append(f"{places[1]}: {error}")
    else:
        reasons.append(f"{places[1]}: not present")
    try:
        return ctypes.CDLL(SONAME), SONAME
    except OSError as error:
        reasons.append(f"{places[2]}: {error}")
    raise ImportError(
        "tq: libtq was not found. Looked in " + "; ".join(reasons) + ". "
        f"Build it with `make lib` and set {LIBRARY_ENV} to build/lib/libtq.so, "
        "install the package with `pip install ./bindings/python` in the repository, which builds "
        "libtq into it, or install libtq with `make install`."
    )


def _declare(library, where):
    """Sets the argument and result types of every function of PROTOTYPES."""
    for name, (restype, argtypes) in PROTOTYPES.items():
        try:
            function = getattr(library, name)
        except AttributeError:
            major, minor = ABI_VERSION
            raise ImportError(
                f"tq: {where} has no function {name}; it is not libtq {major}.{minor}"
            ) from None
        function.restype = restype
        function.argtypes = argtypes


def _check_version(library, where):
    """Refuses a library of another ABI version than ABI_VERSION."""
    number = library.tq_version_number()
    found = (number // 10000, number // 100 % 100)
    if found != ABI_VERSION:
        raise ImportError(
            f"tq: the libtq loaded from {where} is version {library.tq_version().decode()}, "
            f"but this package is written for the ABI of libtq {ABI_VERSION[0]}.{ABI_VERSION[1]}"
        )


lib, LIBRARY_PATH = _open_library()
_declare(lib, LIBRARY_PATH)
_check_version(lib, LIBRARY_PATH)
