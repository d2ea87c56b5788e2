"""tq: a persistent task queue in one SQLite file, through libtq's C ABI.

    import tq

    with tq.Queue("jobs.db") as queue:
        queue.recover()                      # take back what crashed workers held
        queue.push({"file": "a.mp4"})
        task = queue.pull(timeout=1)         # waits up to 1 s for a task
        while task is not None:
            print(task.id, task.payload)
            task = task.finish_and_pull()    # one commit: finish, and claim the next

The library is loaded when this package is imported: from the path in the
``TQ_LIBRARY`` environment variable, else the copy inside the package (in a
wheel built with it), else the system's library search path.
"""

from ._native import (
    ATTEMPTS_KEPT,
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_POOL_SIZE,
    MAX_GROUP_AT_ONCE,
    MAX_PAYLOAD_LEN,
    MAX_POOL_SIZE,
    MAX_QUEUE_NAME_LEN,
    MAX_REASON_LEN,
    MAX_UNIQUE_KEY_LEN,
)
from ._native import LIBRARY_PATH as library_path
from ._native import lib as _lib
from .errors import (
    BusyError,
    CancelledError,
    ClosedError,
    Error,
    EventTimeout,
    FullError,
    InternalError,
    Interrupted,
    InvalidArgumentError,
    InvalidJSONError,
    IoError,
    NotADatabaseError,
    NotHeldError,
    Suspended,
    UnknownOutcomeError,
)
from .admin import UNTIL_RESUMED
from .options import Durability, Item
from .queue import Pushed, Queue
from .schedule import CatchUp, Schedule
from .task import AttemptRecord, State, Step, StepRecord, Task, TaskSnapshot
from .watch import Cancel, CancellationWatch
from . import sqlite
from ._work import WorkStats

__version__ = "0.3.0"

__all__ = [
    "DEFAULT_MAX_ATTEMPTS",
    "DEFAULT_POOL_SIZE",
    "EventTimeout",
    "Suspended",
    "MAX_GROUP_AT_ONCE",
    "MAX_PAYLOAD_LEN",
    "ATTEMPTS_KEPT",
    "MAX_POOL_SIZE",
    "MAX_QUEUE_NAME_LEN",
    "MAX_REASON_LEN",
    "MAX_UNIQUE_KEY_LEN",
    "BusyError",
    "Cancel",
    "CancelledError",
    "CancellationWatch",
    "CatchUp",
    "ClosedError",
    "Durability",
    "Error",
    "FullError",
    "InternalError",
    "Interrupted",
    "InvalidArgumentError",
    "InvalidJSONError",
    "IoError",
    "Item",
    "NotADatabaseError",
    "NotHeldError",
    "UnknownOutcomeError",
    "Pushed",
    "Queue",
    "Schedule",
    "AttemptRecord",
    "State",
    "Step",
    "StepRecord",
    "Task",
    "TaskSnapshot",
    "WorkStats",
    "UNTIL_RESUMED",
    "library_path",
    "library_version",
]


def library_version() -> str:
    """The version of the loaded libtq (``tq_version()``), such as "0.3.0"."""
    return _lib.tq_version().decode()
