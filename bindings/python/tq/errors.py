"""tq's exceptions: ``Error`` and one subclass per negative ``tq_status``.

The message of an exception raised for a failed C call is the library's own
(``tq_last_error()``, read on the thread of the call right after it).
"""


class Error(Exception):
    """A tq call failed. ``status`` is the C status (a negative number).

    ``index`` is set by ``Queue.push_many`` to the position of the payload
    that failed the batch, and is None otherwise."""

    status: int = 0
    index: "int | None" = None

    def __init__(self, message: str, status: "int | None" = None):
        super().__init__(message)
        if status is not None:
            self.status = status

    @property
    def message(self) -> str:
        """The library's message for this failure."""
        return self.args[0]


class Suspended(Exception):
    """Not an error: ``Task.wait_for`` or ``Task.sleep`` handed the task back
    to wait (TQ_SUSPENDED): its delivery is over, no attempt was spent and
    its steps are kept. Let it propagate out of the handler: ``Queue.work``
    then neither finishes nor fails the task, and its next delivery runs
    the handler again, where the same call returns."""


class EventTimeout(TimeoutError):
    """Not a failure of tq: ``Task.wait_for``'s wait timed out before an
    event came (TQ_TIMEOUT), at this delivery or an earlier one. The task
    is still held."""


class InvalidArgumentError(Error):
    """TQ_ERR_INVALID_ARGUMENT: a bad argument or option value, a payload that
    is not UTF-8 or over the queue's limit, or a handle used after ``fork()``."""

    status = -1


class ClosedError(InvalidArgumentError):
    """A ``Queue`` used after ``close()``, or a ``Task`` after ``close()``. The
    library answers TQ_ERR_INVALID_ARGUMENT for a closed handle; the binding
    refuses such a call before it reaches the library. A pull waiting when
    its queue is closed raises it too."""


class InvalidJSONError(Error):
    """TQ_ERR_INVALID_JSON: the payload is not one JSON text; nothing was stored."""

    status = -2


class NotHeldError(Error):
    """TQ_ERR_NOT_HELD: this delivery is no longer current: the task was
    already finished or failed, or its lease was recovered or taken by
    another worker."""

    status = -3


class BusyError(Error):
    """TQ_ERR_BUSY: the file stayed locked by other writers past the busy
    timeout; nothing was done and the call may be tried again."""

    status = -4


class IoError(Error):
    """TQ_ERR_IO: the operating system refused (missing directory, permissions,
    disk full, an I/O error). A write that fails this way may or may not have
    reached the disk."""

    status = -5


class NotADatabaseError(Error):
    """TQ_ERR_NOT_A_DATABASE: the file is not SQLite, is corrupt, or has a
    newer tq schema; it was left untouched."""

    status = -6


class InternalError(Error):
    """TQ_ERR_INTERNAL: a bug in tq. The queue remains usable."""

    status = -7


class Interrupted(Error):
    """TQ_ERR_INTERRUPTED: a pull's wait was ended by ``Queue.interrupt()`` or
    by its ``tq.Cancel``; no task was claimed. (Named without the ``Error``
    suffix so that it does not shadow Python's own ``InterruptedError``.)"""

    status = -8


class UnknownOutcomeError(Error):
    """TQ_ERR_UNKNOWN_OUTCOME: the write may or may not last. On an SQLite
    file at full durability, flushing the committed write to the disk failed
    (later writes of the process to the file then raise IoError until every
    handle on it is closed); on PostgreSQL, the connection to the server was
    lost while the write was being committed."""

    status = -9


class CancelledError(Error):
    """TQ_ERR_CANCELLED: the task was cancelled (``Queue.cancel_task``) while
    this delivery held it: the delivery is over, the task is cancelled and is
    never delivered again. Stop working on it."""

    status = -10


class FullError(Error):
    """TQ_ERR_FULL: the push would take the queue's pending tasks over its
    cap (``Queue.set_max_pending``), and no room came within its
    ``wait_for_room``. Nothing was stored (of a batch, no task): push again
    later."""

    status = -11


#: The exception class for each negative status.
BY_STATUS = {
    cls.status: cls
    for cls in (
        InvalidArgumentError,
        InvalidJSONError,
        NotHeldError,
        BusyError,
        IoError,
        NotADatabaseError,
        InternalError,
        Interrupted,
        UnknownOutcomeError,
        CancelledError,
        FullError,
    )
}


def from_status(status: int, message: str) -> Error:
    """The exception for a negative status; a status this package does not
    know (from a newer library) gives a plain ``Error`` carrying it."""
    cls = BY_STATUS.get(status)
    if cls is None:
        return Error(message, status)
    return cls(message)
