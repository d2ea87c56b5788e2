"""Being told without polling: ``Cancel``, which ends the waits of the
pulls given it, and ``CancellationWatch``, the thread that tells a task's
holder of its cancellation."""

import threading
import weakref
from typing import TYPE_CHECKING

from . import errors
from ._limits import _FIRST_RETRY_S, _MAX_RETRY_S, _TRANSIENT, EMPTY, _check
from ._native import lib

if TYPE_CHECKING:
    from .task import Task


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


class CancellationWatch:
    """A thread telling a holder of its task's cancellation, from
    ``Task.watch_cancellation``. ``cancelled`` is a ``threading.Event`` set
    once the cancellation is recorded; ``stop()`` (or leaving a ``with``
    block) ends the watch and waits for its thread."""

    __slots__ = ("cancelled", "_task", "_ptr", "_callback", "_cancel", "_stopping", "_thread")

    # How long one wait in the library lasts before the next begins.
    _WAIT_MS = 3_600_000

    def __init__(self, task: "Task", ptr, callback):
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
