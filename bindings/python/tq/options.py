"""Arguments into C values: the checks and conversions of durations,
times, integers, strings and JSON; the options objects (``tq_options``,
``tq_push_options``, ``tq_pull_options``, ``tq_schedule_options``) built
from them; ``Durability``, and ``Item``, one task of ``Queue.push_items``."""

import ctypes
import datetime
import enum
import json
import math
import numbers
import os
from ctypes import byref, c_size_t

from . import errors
from ._limits import _INT32_MAX, _INT32_MIN, _INT64_MAX, _INT64_MIN, _SIZE_MAX, _UINT32_MAX, _UINT64_MAX, _check
from ._native import lib

# tq_push_options_set_on_parent_failure's TQ_PARENT_FAILURE_RUN_ANYWAY.
_PARENT_FAILURE_RUN_ANYWAY = 1


class Durability(enum.IntEnum):
    """How far a call's write must reach before it returns (``tq_durability``)."""

    #: Flushed to disk: survives a process crash and a power loss (the default).
    FULL = 0
    #: Survives a process crash; a power loss may lose the latest commits.
    NORMAL = 1


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
    # An int is checked first: the ABC's isinstance costs a microsecond.
    if type(value) is not int and (not isinstance(value, numbers.Integral) or isinstance(value, bool)):
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


def _unix_ms(value, name: str = "run_at") -> int:
    """A point in time (a ``datetime`` or seconds since the Unix epoch) as
    milliseconds since the epoch, clamped to int64_t for the library to judge."""
    if isinstance(value, datetime.datetime):
        value = value.timestamp()
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        raise TypeError(f"{name} must be a datetime or seconds since the epoch, not {type(value).__name__}")
    value = float(value)
    if math.isnan(value):
        raise errors.InvalidArgumentError(f"{name} must be a time, not nan")
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
    expire_after=None,
    expire_at=None,
    deadline_after=None,
    deadline_at=None,
    wait_for_room=None,
    replace_pending=False,
    debounce=None,
    fair_key=None,
):
    """The push options' setters and values for the arguments given."""
    settings = []
    if replace_pending:
        settings.append((lib.tq_push_options_set_replace_pending, True))
    if debounce is not None:
        longest = _milliseconds("debounce", debounce)
        if longest == 0:
            raise errors.InvalidArgumentError("the longest debounce must be positive")
        settings.append((lib.tq_push_options_set_debounce_ms, longest))
    if fair_key is not None:
        settings.append((lib.tq_push_options_set_fair_key, _c_string("fair_key", fair_key)))
    for after_name, after_value, at_name, at_value, after_setter, at_setter in (
        (
            "expire_after",
            expire_after,
            "expire_at",
            expire_at,
            lib.tq_push_options_set_expire_after_ms,
            lib.tq_push_options_set_expire_at_unix_ms,
        ),
        (
            "deadline_after",
            deadline_after,
            "deadline_at",
            deadline_at,
            lib.tq_push_options_set_deadline_after_ms,
            lib.tq_push_options_set_deadline_unix_ms,
        ),
    ):
        if after_value is not None and at_value is not None:
            raise errors.InvalidArgumentError(f"give {after_name} or {at_name}, not both")
        if after_value is not None:
            settings.append((after_setter, _milliseconds(after_name, after_value)))
        if at_value is not None:
            settings.append((at_setter, _unix_ms(at_value, at_name)))
    if wait_for_room is not None:
        settings.append(
            (lib.tq_push_options_set_wait_for_room_ms, _milliseconds("wait_for_room", wait_for_room))
        )
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


class Item:
    """One task of ``Queue.push_items``: its payload (as ``push`` takes it)
    and the options of ``push``, plus ``after_items``, the indexes of
    earlier items of the same call that it waits for."""

    __slots__ = ("_fair_key", "_options", "payload")

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
        fair_key=None,
    ):
        self.payload = payload
        self._fair_key = fair_key
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
        return _push_settings(*self._options, fair_key=self._fair_key)
