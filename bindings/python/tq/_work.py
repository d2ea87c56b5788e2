"""``Queue.work``: handlers on a pool of threads, fed by one claiming loop.

One call of ``Queue.work`` runs four kinds of threads:

- the claiming loop, on the caller's thread: whenever handlers are free it
  claims as many tasks as there are free handlers in one ``pull_many``,
  waiting (interruptibly) while none is ready;
- up to ``concurrency`` handler threads, each running the handler on one
  task, then failing the task (the handler raised) or handing it to the
  finisher (it returned);
- one finishing thread, which finishes the tasks handed to it, all those
  waiting (at most ``concurrency``), in one ``finish_many`` per commit;
- one renewing thread, which extends the lease of every task whose handler
  runs, every third of the lease.

A handler's slot is freed once its task is failed or handed to the
finisher, whose queue holds at most ``concurrency`` tasks: so the tasks a
worker holds are at most three times its concurrency (running, waiting for
the finisher, in the finisher's batch).
"""

import concurrent.futures
import inspect
import logging
import math
import queue as _queue_module
import threading
import time
from typing import NamedTuple

from . import errors
from .queue import _FIRST_RETRY_S, _MAX_RETRY_S, _TRANSIENT, Cancel, Task

#: The logger of ``Queue.work``'s default error handler.
logger = logging.getLogger("tq")

# The shortest lease work takes: renewals come every third of it.
_MIN_LEASE_S = 0.003

# How often the thread watching a ``stop`` event looks whether the work
# ended without it (it returns at once when the event is set).
_STOP_POLL_S = 0.5


def _retry_for(lease: float, retryable: "tuple[type[errors.Error], ...]", report, call):
    """Returns ``call()``, calling it again while it raises one of
    ``retryable``, for up to ``lease`` seconds from the first call: past it,
    the tasks concerned are delivered again anyway. Before each new call it
    passes the error to ``report`` and waits, ``_FIRST_RETRY_S`` doubling to
    ``_MAX_RETRY_S``. Otherwise raises ``call``'s last error."""
    retry_s = _FIRST_RETRY_S
    give_up = time.monotonic() + lease
    while True:
        try:
            return call()
        except retryable as error:
            if time.monotonic() >= give_up:
                raise
            report(error)
            time.sleep(retry_s)
            retry_s = min(2 * retry_s, _MAX_RETRY_S)


class WorkStats(NamedTuple):
    """What ``Queue.work`` returns: how many of the tasks it claimed it
    finished (their handler returned), failed (their handler raised) and
    lost (their finish or fail was refused: cancelled meanwhile, lease lost,
    queue closed, or refused past one lease)."""

    finished: int
    failed: int
    lost: int


def _log_error(task: "Task | None", error: BaseException) -> None:
    """``Queue.work``'s default error handler: a warning on the ``tq`` logger."""
    if task is None:
        logger.warning("tq: work: %s", error)
    else:
        logger.warning("tq: work: task %d: %s", task.id, error)


def _takes_lost(handler) -> bool:
    """Whether ``handler`` can be called with a second positional argument."""
    try:
        signature = inspect.signature(handler)
    except (TypeError, ValueError):
        return False
    try:
        signature.bind(None, None)
    except TypeError:
        return False
    return True


class _Running:
    """A task whose handler runs: its next renewal and its ``lost`` event."""

    __slots__ = ("task", "lost", "due", "over")

    def __init__(self, task: Task, due: float):
        self.task = task
        self.lost = threading.Event()
        self.due = due
        self.over = False


class Worker:
    """One call of ``Queue.work``; not for direct use."""

    def __init__(self, queue, handler, concurrency: int, lease: float, stop, on_error):
        self._queue = queue
        self._handler = handler
        self._takes_lost = _takes_lost(handler)
        self._concurrency = concurrency
        self._lease = lease
        self._stop = stop
        self._on_error = _log_error if on_error is None else on_error
        # Free handler slots; the claiming loop waits on it for one.
        self._slots = threading.Condition()
        self._free = concurrency
        # Set when the claiming loop must stop: ``stop`` was set.
        self._stopping = threading.Event()
        self._cancel = Cancel()
        # Tasks whose handler returned, for the finisher; None ends it.
        self._to_finish = _queue_module.Queue(maxsize=concurrency)
        # The tasks whose lease is renewed, guarded by the condition.
        self._renewals = threading.Condition()
        self._running: "set[_Running]" = set()
        self._ended = False
        self._stats_lock = threading.Lock()
        self._finished = self._failed = self._lost = 0

    def run(self) -> WorkStats:
        """Claims and runs tasks until stopped; see ``Queue.work``."""
        finisher = threading.Thread(target=self._finish_in_batches, name="tq-work-finish", daemon=True)
        renewer = threading.Thread(target=self._renew_leases, name="tq-work-renew", daemon=True)
        finisher.start()
        renewer.start()
        if self._stop is not None:
            threading.Thread(target=self._watch_stop, name="tq-work-stop", daemon=True).start()
        pool = concurrent.futures.ThreadPoolExecutor(self._concurrency, thread_name_prefix="tq-work")
        try:
            self._claim(pool)
        finally:
            pool.shutdown(wait=True)
            self._to_finish.put(None)
            finisher.join()
            with self._renewals:
                self._ended = True
                self._renewals.notify()
            renewer.join()
        return WorkStats(self._finished, self._failed, self._lost)

    # --- Claiming ---------------------------------------------------------------

    def _claim(self, pool) -> None:
        """Claims tasks for the free handlers until stopped. Raises the error
        that stopped it for good (after which ``run`` waits for the handlers)."""
        retry_s = _FIRST_RETRY_S
        while True:
            with self._slots:
                while not self._free and not self._stopping.is_set():
                    self._slots.wait()
                if self._stopping.is_set():
                    return
                free, self._free = self._free, 0
            tasks = []
            try:
                tasks = self._queue.pull_many(free, math.inf, lease=self._lease, cancel=self._cancel)
            except errors.Interrupted:
                # ``stop`` was set, or ``Queue.interrupt()`` was called.
                return
            except _TRANSIENT as error:
                self._report(None, error)
                if self._stopping.wait(retry_s):
                    return
                retry_s = min(2 * retry_s, _MAX_RETRY_S)
                continue
            else:
                retry_s = _FIRST_RETRY_S
            finally:
                self._release(free - len(tasks))
            now = time.monotonic()
            for task in tasks:
                pool.submit(self._run, _Running(task, now + self._lease / 3))

    def _release(self, count: int) -> None:
        """Gives ``count`` handler slots back to the claiming loop."""
        if count:
            with self._slots:
                self._free += count
                self._slots.notify()

    def _watch_stop(self) -> None:
        """Waits for ``stop`` to be set, then ends the claiming loop's wait."""
        while not self._stop.wait(_STOP_POLL_S):
            with self._renewals:
                if self._ended:
                    return
        self._stopping.set()
        self._cancel.trigger()
        with self._slots:
            self._slots.notify()

    # --- Handling -----------------------------------------------------------------

    def _run(self, running: _Running) -> None:
        """Runs the handler on one task (on a pool thread), then fails the
        task or hands it to the finisher, then frees the slot."""
        task = running.task
        with self._renewals:
            self._running.add(running)
            self._renewals.notify()
        failure = None
        try:
            if self._takes_lost:
                self._handler(task, running.lost)
            else:
                self._handler(task)
        except BaseException as error:  # noqa: BLE001 (any handler error fails the task)
            failure = error
        finally:
            with self._renewals:
                running.over = True
                self._running.discard(running)
        if failure is None:
            self._to_finish.put(task)
        else:
            self._fail(task, failure)
        self._release(1)

    def _fail(self, task: Task, failure: BaseException) -> None:
        """Fails ``task`` with the handler's exception as its reason, trying
        again while refused for a while, for up to one lease."""
        try:
            _retry_for(
                self._lease,
                _TRANSIENT,
                lambda error: self._report(task, error),
                lambda: task.fail(failure),
            )
        except errors.Error as error:
            self._report(task, error)
            self._count(lost=1)
            return
        self._count(failed=1)

    # --- Finishing ----------------------------------------------------------------

    def _finish_in_batches(self) -> None:
        """Finishes the tasks handed over, all those waiting (at most the
        concurrency) in one ``finish_many``, until handed None."""
        ending = False
        while not ending:
            task = self._to_finish.get()
            if task is None:
                return
            batch = [task]
            while len(batch) < self._concurrency:
                try:
                    task = self._to_finish.get_nowait()
                except _queue_module.Empty:
                    break
                if task is None:
                    ending = True
                    break
                batch.append(task)
            self._finish_batch(batch)

    def _finish_batch(self, batch: "list[Task]") -> None:
        """Finishes ``batch``, trying again while refused for a while or the
        outcome is not known, for up to one lease (a task whose finish
        committed after all is then reported as not held)."""
        try:
            done = _retry_for(
                self._lease,
                (*_TRANSIENT, errors.UnknownOutcomeError),
                lambda error: self._report(None, error),
                lambda: self._queue.finish_many(batch),
            )
        except errors.Error as error:
            failure = error
        else:
            for task, finished in zip(batch, done):
                if not finished:
                    self._report(task, errors.NotHeldError(f"task {task.id} is no longer held"))
            self._count(finished=sum(done), lost=len(done) - sum(done))
            return
        for task in batch:
            self._report(task, failure)
        self._count(lost=len(batch))

    # --- Renewing -----------------------------------------------------------------

    def _renew_leases(self) -> None:
        """Extends the lease of each running task every third of the lease
        until the work ends. A renewal that finds the task cancelled or no
        longer held sets the handler's ``lost`` event."""
        period = self._lease / 3
        while True:
            with self._renewals:
                while True:
                    if self._ended:
                        return
                    now = time.monotonic()
                    due = [running for running in self._running if running.due <= now]
                    if due:
                        break
                    next_due = min((running.due for running in self._running), default=None)
                    self._renewals.wait(None if next_due is None else next_due - now)
                for running in due:
                    running.due = now + period
            for running in due:
                self._renew(running)

    def _renew(self, running: _Running) -> None:
        try:
            running.task.extend(self._lease)
        except (errors.CancelledError, errors.NotHeldError) as error:
            with self._renewals:
                if running.over:
                    return  # the handler returned meanwhile: the error is stale
                self._running.discard(running)
            running.lost.set()
            self._report(running.task, error)
        except errors.Error as error:
            if not running.over:
                self._report(running.task, error)

    # --- Reporting ----------------------------------------------------------------

    def _report(self, task: "Task | None", error: BaseException) -> None:
        """Passes an error of work's own calls to ``on_error``; an exception
        from ``on_error`` is logged rather than stopping the work."""
        try:
            self._on_error(task, error)
        except Exception:  # noqa: BLE001
            logger.exception("tq: work: the error handler raised")

    def _count(self, finished: int = 0, failed: int = 0, lost: int = 0) -> None:
        with self._stats_lock:
            self._finished += finished
            self._failed += failed
            self._lost += lost
