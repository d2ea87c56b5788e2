"""What every module of the binding shares: the statuses a C call returns
and ``_check``, which raises for the negative ones; the ranges of the C
integer types; how long a pull waits in one call; which errors are
transient and how long to wait before trying again."""

import ctypes

from . import errors
from ._native import lib

OK = 0
EMPTY = 1
DUPLICATE = 2
MERGED = 3
SUSPENDED = 4
TIMEOUT = 5

_UINT32_MAX = 2**32 - 1
_UINT64_MAX = 2**64 - 1
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_SIZE_MAX = ctypes.c_size_t(-1).value

#: The longest a waiting pull stays inside one library call, in seconds.
#: Between two calls Python runs its signal handlers (Ctrl-C).
WAIT_SLICE = 0.1

# The same off the main thread, where no signal handler runs: only a wait
# without a bound is cut into calls.
_OFF_MAIN_WAIT_SLICE = 3600.0

# Errors of a call that refuse it only for a while (BusyError: the file's
# write lock held past the busy timeout; IoError: on PostgreSQL, a
# connection cut or a server restarting): the cancellation watch and
# ``Queue.work`` try it again after these waits, in seconds, doubling.
_TRANSIENT = (errors.BusyError, errors.IoError)
_FIRST_RETRY_S = 0.05
_MAX_RETRY_S = 2.0


def _check(status: int) -> int:
    """Returns a non-negative status; raises the exception for a negative one
    with this thread's ``tq_last_error()``. Call straight after the C call."""
    if status < 0:
        raise errors.from_status(status, lib.tq_last_error().decode("utf-8", "replace"))
    return status
