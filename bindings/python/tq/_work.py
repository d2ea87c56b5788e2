"""``Queue.work``: handler threads that finish and claim for themselves.

One call of ``Queue.work`` runs ``concurrency`` handler threads and one
renewing thread; the caller's thread waits for them.

A handler thread runs the handler on one task, then puts the task on the
list of tasks to finish (or fails it, when the handler raised), then takes
its next task: one claimed before and not yet taken, or else one from a
commit of its own that finishes every task on the list and claims a task
for each handler thread not running a handler
(``Queue.finish_and_pull_many``), under a lock that lets one thread commit
at a time. No task passes from one thread to another on the way, and a
busy worker pays one commit for several tasks. The tasks held (running,
claimed and not yet taken, or waiting to be finished) are never more than
the concurrency.

Handlers shorter than a thread's wake-up (``_SHORT_HANDLER_S``, measured
as they run) are run in turn by the thread at hand: waking another thread
for each would cost more than the handler, and under Python's global
interpreter lock the threads could not run them at once anyway. Longer
handlers (those that wait on I/O) get a thread each: tasks claimed are
handed to sleeping threads at once, and one thread waits for new tasks
while the others work. When nothing is ready, one thread waits in a pull
and the others sleep until it has tasks for them.

The renewing thread extends the lease of every task whose handler runs,
every third of the lease.
"""

import collections
import inspect
import logging
import math
import threading
import time
from typing import NamedTuple

from . import errors
from ._native import lib
from ._limits import _FIRST_RETRY_S, _MAX_RETRY_S, _TRANSIENT
from .options import _PULL_OPTIONS, _milliseconds
from .task import Task
from .watch import Cancel

#: The logger of ``Queue.work``'s default error handler.
logger = logging.getLogger("tq")

# The shortest lease work takes: renewals come every third of it.
_MIN_LEASE_S = 0.003

# A handler that takes less, on average, is run in turn by the thread at
# hand rather than waking another (see the module's comment): a thread's
# wake-up costs tens of microseconds, and a task claimed waits at most the
# concurrency times this for the thread to come back to it.
_SHORT_HANDLER_S = 0.001

# How the average handler time follows each new one.
_HANDLER_TIME_WEIGHT = 0.1

# How often the renewing thread looks, while handlers run, for one that
# turned long while tasks claimed wait for the thread running it.
_TEND_S = 0.01

# How long the caller's thread waits at a time, for ``stop`` to be set or
# the handler threads to end (so that Ctrl-C is seen meanwhile).
_STOP_POLL_S = 0.05


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
    """A task whose handler runs: when it started, its next renewal and, for
    a handler that takes one, its ``lost`` event."""

    __slots__ = ("task", "lost", "started", "due", "over")

    def __init__(self, task: Task, started: float, due: float, lost: "threading.Event | None"):
        self.task = task
        self.lost = lost
        self.started = started
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
        # Ends the pulls waiting for a task once the work stops.
        self._cancel = Cancel()
        self._stopping = threading.Event()
        # The error that stopped the work for good, raised by ``run``.
        self._failure: "BaseException | None" = None
        # One thread at a time finishes the tasks to finish and claims.
        self._commit = threading.Lock()
        # Guards what follows; handler threads with nothing to do sleep on
        # it (``_idle``) while another waits in a pull.
        self._state = threading.Lock()
        self._idle = threading.Condition(self._state)
        # Tasks claimed and not yet taken by a handler thread.
        self._claimed: "collections.deque[Task]" = collections.deque()
        self._to_finish: "list[Task]" = []
        # Handler threads running a handler, and asleep on ``_idle``.
        self._handling = 0
        self._sleeping = 0
        # A handler thread waits in a pull, for this many tasks.
        self._pulling = False
        self._pull_wanted = 0
        # The handlers' average time, once one has run.
        self._handler_s: "float | None" = None
        # The tasks whose lease is renewed, guarded by the condition.
        self._renewals = threading.Condition()
        self._running: "set[_Running]" = set()
        # The renewing thread looks every ``_TEND_S`` (handlers run or
        # started since its last look), and the handlers started since.
        self._tending = False
        self._started = 0
        self._ended = False
        self._finished = self._failed = self._lost = 0
        # The claims' options (their lease), built once for every commit.
        self._claim_options = None

    def run(self) -> WorkStats:
        """Claims and runs tasks until stopped; see ``Queue.work``."""
        self._claim_options = _PULL_OPTIONS.build(
            [(lib.tq_pull_options_set_lease_ms, _milliseconds("lease", self._lease))]
        )
        try:
            return self._run_threads()
        finally:
            _PULL_OPTIONS.free(self._claim_options)

    def _run_threads(self) -> WorkStats:
        renewer = threading.Thread(target=self._renew_leases, name="tq-work-renew", daemon=True)
        renewer.start()
        threads = [
            threading.Thread(target=self._handle_tasks, name=f"tq-work-{n}", daemon=True)
            for n in range(self._concurrency)
        ]
        for thread in threads:
            thread.start()
        try:
            for thread in threads:
                while thread.is_alive():
                    if self._stop is None or self._stopping.is_set():
                        thread.join(_STOP_POLL_S)
                    elif self._stop.wait(_STOP_POLL_S):
                        self._stop_work()
        except BaseException:
            # Ctrl-C on the caller's thread: the handlers end, then it raises.
            self._stop_work()
            for thread in threads:
                thread.join()
            raise
        finally:
            with self._renewals:
                self._ended = True
                self._renewals.notify()
            renewer.join()
        if self._failure is not None:
            raise self._failure
        return WorkStats(self._finished, self._failed, self._lost)

    def _stop_work(self, failure: "BaseException | None" = None) -> None:
        """Claims nothing more, and ends the pulls waiting; keeps the first
        ``failure`` for ``run`` to raise."""
        with self._state:
            if failure is not None and self._failure is None:
                self._failure = failure
        if not self._stopping.is_set():
            self._stopping.set()
            self._cancel.trigger()
            with self._state:
                self._idle.notify_all()

    # --- Handling -----------------------------------------------------------------

    def _handle_tasks(self) -> None:
        """A handler thread: runs the handler on each task it takes until
        the work stops and no task claimed for it is left."""
        try:
            while True:
                task = self._next_task()
                if task is None:
                    return
                self._run(task)
        except BaseException as error:  # noqa: BLE001 (stops the work; run raises it)
            self._stop_work(error)
        finally:
            self._flush()

    def _run(self, task: Task) -> None:
        """Runs the handler on ``task``, renewing its lease meanwhile, then
        puts it on the list to finish or fails it."""
        lost = threading.Event() if self._takes_lost else None
        started = time.monotonic()
        running = _Running(task, started, started + self._lease / 3, lost)
        with self._renewals:
            self._running.add(running)
            self._started += 1
            if not self._tending:
                # The renewing thread sleeps until the next renewal: it
                # tends the handlers from now on.
                self._tending = True
                self._renewals.notify()
        failure = None
        suspended = False
        try:
            if lost is None:
                self._handler(task)
            else:
                self._handler(task, lost)
        except errors.Suspended:
            # The task was handed back to wait: its delivery is over.
            failure = None
            suspended = True
        except BaseException as error:  # noqa: BLE001 (any handler error fails the task)
            failure = error
        finally:
            with self._renewals:
                running.over = True
                self._running.discard(running)
        took = time.monotonic() - started
        with self._state:
            self._handling -= 1
            average = self._handler_s
            self._handler_s = took if average is None else average + _HANDLER_TIME_WEIGHT * (took - average)
            if failure is None and not suspended:
                self._to_finish.append(task)
        if failure is not None:
            self._fail(task, failure)

    def _short_handlers(self) -> bool:
        """Whether handlers are short (see ``_SHORT_HANDLER_S``); under
        ``_state``."""
        return self._handler_s is not None and self._handler_s < _SHORT_HANDLER_S

    def _next_task(self) -> "Task | None":
        """The next task for this thread, counted as handled: one claimed
        and not yet taken, or one it claims, or one it waits for; None once
        the work stops and no task claimed is left. A thread whose task
        waits to be finished takes another only when handlers are short (it
        is back soon to finish both); otherwise it commits first."""
        retry_s = _FIRST_RETRY_S
        while True:
            with self._state:
                short = self._short_handlers()
                if short and (self._handling or self._commit.locked()) and not self._stopping.is_set():
                    # Another thread is at hand for the next task.
                    self._sleep()
                    continue
                if self._claimed and (not self._to_finish or short):
                    return self._take_claimed()
            with self._commit:
                if self._stopping.is_set():
                    # Tasks claimed before the stop are run; none after.
                    self._finish_pending()
                    with self._state:
                        return self._take_claimed() if self._claimed else None
                try:
                    self._finish_and_claim()
                except _TRANSIENT as error:
                    self._report(None, error)
                    self._stopping.wait(retry_s)
                    retry_s = min(2 * retry_s, _MAX_RETRY_S)
                    continue
                with self._state:
                    if self._claimed:
                        return self._take_claimed()
            self._wait_for_tasks()

    def _sleep(self) -> None:
        """Sleeps until woken (tasks for it, a wait to take over, a stop).
        Under ``_state``."""
        self._sleeping += 1
        try:
            self._idle.wait()
        finally:
            self._sleeping -= 1

    def _take_claimed(self) -> Task:
        """Takes the first task claimed, counted as handled, and wakes the
        sleeping threads that its other tasks, and a wait for new ones, are
        for. Under ``_state``, with a task claimed."""
        task = self._claimed.popleft()
        self._handling += 1
        if self._sleeping and not self._short_handlers():
            # Long handlers: each task claimed gets a thread at once, and
            # one more thread waits for new tasks while these work.
            self._idle.notify(len(self._claimed) + (not self._pulling))
        return task

    def _finish_and_claim(self) -> None:
        """Finishes the tasks to finish and claims one task for each handler
        thread neither handling nor waiting for one claimed (or for one a
        pull waits for), in one commit. Under the commit lock."""
        with self._state:
            batch, self._to_finish = self._to_finish, []
            wanted = self._concurrency - self._handling - len(self._claimed) - self._pull_wanted
            wanted = max(wanted, 0)
        if not batch and not wanted:
            return
        try:
            finished, claimed = self._queue._finish_and_claim("work", batch, wanted, self._claim_options)
        except errors.Error as error:
            # Nothing done, or not known: the finishes are tried alone.
            self._finish_batch(batch)
            if isinstance(error, errors.UnknownOutcomeError):
                return
            raise
        self._count_finished(batch, finished)
        with self._state:
            self._claimed.extend(claimed)

    def _finish_pending(self) -> None:
        """Finishes the tasks to finish, claiming nothing. Under the commit
        lock."""
        with self._state:
            batch, self._to_finish = self._to_finish, []
        if batch:
            self._finish_batch(batch)

    def _wait_for_tasks(self) -> None:
        """None being ready, waits for tasks: in a pull for the threads not
        handling, or asleep while another thread pulls, until woken."""
        with self._state:
            if self._pulling or self._claimed:
                if not self._claimed and not self._stopping.is_set():
                    self._sleep()
                return
            self._pulling = True
            wanted = self._pull_wanted = max(self._concurrency - self._handling, 1)
        tasks = []
        try:
            tasks = self._queue.pull_many(wanted, math.inf, lease=self._lease, cancel=self._cancel)
        except errors.Interrupted:
            # ``stop`` was set, or ``Queue.interrupt()`` was called.
            self._stop_work()
        except _TRANSIENT as error:
            self._report(None, error)
            self._stopping.wait(_FIRST_RETRY_S)
        finally:
            with self._state:
                self._pulling = False
                self._pull_wanted = 0
                self._claimed.extend(tasks)
                if self._sleeping and not tasks:
                    # Another thread takes over the wait.
                    self._idle.notify()

    def _flush(self) -> None:
        """Finishes the tasks left to finish, as a thread ends."""
        with self._commit:
            self._finish_pending()

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

    def _finish_batch(self, batch: "list[Task]") -> None:
        """Finishes ``batch``, trying again while refused for a while or the
        outcome is not known, for up to one lease (a task whose finish
        committed after all is then reported as not held)."""
        try:
            finished = _retry_for(
                self._lease,
                (*_TRANSIENT, errors.UnknownOutcomeError),
                lambda error: self._report(None, error),
                lambda: self._queue.finish_many(batch),
            )
        except errors.Error as error:
            for task in batch:
                self._report(task, error)
            self._count(lost=len(batch))
            return
        self._count_finished(batch, finished)

    def _count_finished(self, batch: "list[Task]", finished: "list[bool]") -> None:
        for task, done in zip(batch, finished):
            if not done:
                self._report(task, errors.NotHeldError(f"task {task.id} is no longer held"))
        done = sum(finished)
        self._count(finished=done, lost=len(finished) - done)

    # --- Renewing -----------------------------------------------------------------

    def _renew_leases(self) -> None:
        """Extends the lease of each running task every third of the lease
        until the work ends. A renewal that finds the task cancelled or no
        longer held sets the handler's ``lost`` event. While handlers run,
        it also tends them (``_tend``) every ``_TEND_S``; a handler starting
        wakes it only when it sleeps longer (none ran since its last look).
        A task that starts is due a third of a lease later: that wake-up
        is all it needs."""
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
                    next_due = min((running.due for running in self._running), default=now + period)
                    wait_s = min(next_due, now + period) - now
                    # Asleep longer only once a look found no handler since
                    # the last: a busy worker never has to wake it.
                    self._tending = bool(self._running or self._started)
                    self._started = 0
                    if self._running:
                        self._tend(now)
                    if self._tending:
                        wait_s = min(wait_s, _TEND_S)
                    self._renewals.wait(wait_s)
                for running in due:
                    running.due = now + period
            for running in due:
                self._renew(running)

    def _tend(self, now: float) -> None:
        """Counts handlers as long once one has run longer than a short
        one, and wakes sleeping threads for the tasks claimed that wait
        meanwhile for the thread running it. Under ``_renewals``."""
        longest = now - min(running.started for running in self._running)
        if longest < _SHORT_HANDLER_S:
            return
        with self._state:
            if self._handler_s is not None and self._handler_s < longest:
                self._handler_s = longest
            if self._claimed and self._sleeping:
                self._idle.notify(len(self._claimed))

    def _renew(self, running: _Running) -> None:
        try:
            running.task.extend(self._lease)
        except (errors.CancelledError, errors.NotHeldError) as error:
            with self._renewals:
                if running.over:
                    return  # the handler returned meanwhile: the error is stale
                self._running.discard(running)
            if running.lost is not None:
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
        with self._state:
            self._finished += finished
            self._failed += failed
            self._lost += lost
