"""tq's Python binding against the Python prototype it replaces, in one process.

    make bench-python                      (from the repository root)
    python3 bench/python_bench.py [PROTOTYPE]   (tq importable, see bindings/python)
    TQ_BENCH_QUICK=1 make bench-python     a smoke run of a few seconds

Three subjects work on fresh files in one directory, at the same durability:
first full (SQLite's synchronous=FULL in WAL mode, the prototype's default,
and tq's), then normal (synchronous=NORMAL: tq's Durability.NORMAL, and the
prototype's connections switched by a subclass that leaves its code as is):

- prototype: the prototype's Queue class (../shared/baseline/prototype_queue.py
  from the repository root, or the path given as argument or in TQ_PROTOTYPE),
  imported and used unchanged: push(obj), pull(), finish(id). Without that
  file its cells are skipped, and the header says so.
- tq: the binding: Queue.push, pull, Task.payload, finish, finish_and_pull,
  push_many, pull_many, finish_many.
- ctypes: libtq's functions called straight through ctypes with the same JSON
  work, without the binding's classes: the floor for any ctypes binding, so
  tq/ctypes is the binding's own overhead.

First, the plain calls a user migrating from the prototype writes (push;
pull, then finish; no batches, no finish_and_pull), against the prototype
and against persist-queue (SQLiteAckQueue from PyPI: put; get, then ack),
installed by make bench-python and skipped, with the reason in the header,
when it cannot be imported:

- push, 1 thread: single pushes.
- drain, 4 threads pull → finish: 4 threads sharing one queue object pull
  a task and finish it, one at a time, until none is left.
- 2 producers + 2 consumers, pull → finish: as below, each tq consumer
  waiting in a blocking pull and then finishing the task.

- drain, 1 thread pull → finish: the same from one thread, so that the
  rows show what more threads bring.

Then tq's worker helper, Queue.work, where the prototype's users write the
plain loops above, against the prototype's row it replaces:

- drain, Queue.work(concurrency=4): the tasks pushed beforehand, against
  the prototype's 4 threads pulling and finishing.
- 2 producers + Queue.work(concurrency=2): 2 threads push while Queue.work
  runs, against the prototype's 2 producers + 2 consumers.

Then every scenario, each timed alone on a fresh file:

- push: single pushes from one thread.
- pull+finish: one thread pulls a task, then finishes it (two commits).
- worker loop: one thread drains the backlog the best way each queue offers:
  tq finishes each task and claims the next in one commit (finish_and_pull);
  the prototype has only pull+finish.
- worker loop, 4 threads: the same from 4 threads sharing one tq.Queue (whose
  writes then share commits); the prototype opens a connection per thread,
  as it is written to.
- 2 producers + 2 consumers: 2 threads push while 2 threads work; a tq
  consumer waits in a blocking pull (ended by a tq.Cancel once every task is
  in), a prototype consumer that finds nothing sleeps 0.5 ms.
- batch push: push_many of 1,000 payloads per call (100 in the quick run).
- batch pull+finish: pull_many of 100, then finish_many of them.

The tasks a drain works on are pushed beforehand, untimed. The ctypes subject
runs the one-thread scenarios; the prototype has no batches, so the batch
rows compare tq with its single pushes and its pull+finish.

Each figure is the median of the runs' operations per second, with min and
max; runs are interleaved (prototype, tq, ctypes, prototype, ...) so a noisy
stretch of a shared machine touches all alike. Correctness is checked after
each timed part: every task delivered once with its payload, none left. A
run in which a queue raises (the prototype's push giving up with "database
is locked" after its timeout under contention, say) is reported on stderr,
counted as failed in its cell and left out of the figures.

Knobs: TQ_BENCH_RUNS (5), TQ_BENCH_OPS (2000; the batch scenarios use ten
times as many tasks), TQ_BENCH_QUICK=1 (1 run of 100 operations),
TQ_BENCH_DIR (target/bench-tmp: a directory on the disk to measure, not a
tmpfs /tmp), TQ_PROTOTYPE.
"""

import ctypes
import importlib.util
import json
import math
import os
import platform
import shutil
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import tq
from tq import _native

try:
    import persistqueue
    from persistqueue.serializers import json as persistqueue_json
except ImportError:  # its cells are skipped, and the header says so
    persistqueue = None

REPOSITORY = Path(__file__).resolve().parent.parent
QUICK = os.environ.get("TQ_BENCH_QUICK") == "1"
RUNS = 1 if QUICK else int(os.environ.get("TQ_BENCH_RUNS", "5"))
OPS = 100 if QUICK else int(os.environ.get("TQ_BENCH_OPS", "2000").replace("_", ""))
BATCH_OPS = 10 * OPS
PUSH_BATCH = 100 if QUICK else 1000
PULL_BATCH = 100
DURABILITIES = ("full", "normal")
THREADS = 4
IDLE_SLEEP = 0.0005

PUSH = "push"
PULL_FINISH = "pull+finish"
LOOP = "worker loop"
LOOP_THREADS = f"worker loop, {THREADS} threads"
PRODUCERS_CONSUMERS = "2 producers + 2 consumers"
# The plain calls a user migrating from the prototype writes: push; pull,
# then finish. No batches, no finish_and_pull.
PLAIN_PUSH = "push, 1 thread"
PLAIN_DRAIN_ONE = "drain, 1 thread pull → finish"
PLAIN_DRAIN = f"drain, {THREADS} threads pull → finish"
PLAIN_MIXED = "2 producers + 2 consumers, pull → finish"
PLAIN_SCENARIOS = [PLAIN_PUSH, PLAIN_DRAIN_ONE, PLAIN_DRAIN, PLAIN_MIXED]
# tq's worker helper, Queue.work, where the prototype's users write the
# plain loops above: each row is compared with the prototype's row named.
WORK_DRAIN = f"drain, Queue.work(concurrency={THREADS})"
WORK_MIXED = "2 producers + Queue.work(concurrency=2)"
WORK_SCENARIOS = {WORK_DRAIN: PLAIN_DRAIN, WORK_MIXED: PLAIN_MIXED}
PERSIST_QUEUE_VERSION = "1.1.0"
BATCH_PUSH = f"batch push ({PUSH_BATCH:,} per call)"
BATCH_PULL = f"batch pull+finish ({PULL_BATCH} per call)"
SCENARIOS = [PUSH, PULL_FINISH, LOOP, LOOP_THREADS, PRODUCERS_CONSUMERS, BATCH_PUSH, BATCH_PULL]
ALL_SCENARIOS = PLAIN_SCENARIOS + SCENARIOS + list(WORK_SCENARIOS)
# The prototype has no batches: its single operations stand in for them.
PROTOTYPE_STAND_IN = {BATCH_PUSH: PUSH, BATCH_PULL: PULL_FINISH}


def fail(message):
    sys.exit(f"python_bench: {message}")


def load_prototype():
    """The prototype's path and module; the module is None when the file is
    missing (its cells are then skipped)."""
    given = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("TQ_PROTOTYPE")
    path = Path(given or REPOSITORY.parent / "shared" / "baseline" / "prototype_queue.py")
    if not path.is_file():
        return path, None
    sys.dont_write_bytecode = True  # the baseline's folder is not ours to write in
    spec = importlib.util.spec_from_file_location("prototype_queue", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return path, module


def payload(index):
    return {"index": index, "file": f"video-{index:06}.mp4", "sleep": 0.01}


# --- Subjects: the same operations over each queue ----------------------------
#
# push(obj); pull_finish() -> obj or None; drain(deliver): the worker loop,
# calling deliver(obj) for each task until none is ready; consume(deliver,
# done): a consumer running until done() is true, where deliver(obj) returns
# True for the last task; consume_plain(deliver, done): the same with the
# plain calls. tq and ctypes also have push_many(objs) and
# drain_batches(deliver).


def at_normal(queue_class):
    """The prototype's Queue with each new connection set to
    synchronous=NORMAL: its code unchanged, only its SQLite setting."""

    class AtNormal(queue_class):
        def _get_conn(self):
            conn = super()._get_conn()
            if not getattr(self._local, "normal", False):
                conn.execute("PRAGMA synchronous=NORMAL")
                self._local.normal = True
            return conn

    return AtNormal


class Polling:
    """A consumer for a queue without a blocking pull: it pulls, and sleeps
    IDLE_SLEEP when it finds nothing."""

    def consume(self, deliver, done):
        while not done():
            obj = self.pull_finish()
            if obj is None:
                time.sleep(IDLE_SLEEP)
            else:
                deliver(obj)

    consume_plain = consume


class Prototype(Polling):
    name = "prototype"

    def __init__(self, module, file, durability):
        queue_class = module.Queue if durability == "full" else at_normal(module.Queue)
        self.queue = queue_class(file)

    def push(self, obj):
        self.queue.push(obj)

    def pull_finish(self):
        """Claims and finishes one task; returns its payload, or None."""
        got = self.queue.pull()
        if got is None:
            return None
        task_id, obj = got
        self.queue.finish(task_id)
        return obj

    def drain(self, deliver):
        while (obj := self.pull_finish()) is not None:
            deliver(obj)

    def left(self):
        check = sqlite3.connect(self.queue.db_path)
        count = check.execute("SELECT count(*) FROM tasks").fetchone()[0]
        check.close()
        return count

    def close(self):
        # Its connections belong to the threads that opened them (sqlite3
        # refuses to close them from another); they close when collected.
        self.queue = None


class PersistQueue(Polling):
    """persist-queue's SQLiteAckQueue, from PyPI: put(obj); get() then
    ack(id). Its connections (one to put, one to get, shared by all threads
    behind its lock) are set to synchronous=NORMAL at normal."""

    name = "persist-queue"

    def __init__(self, file, durability):
        self.queue = persistqueue.SQLiteAckQueue(
            file + ".d", multithreading=True, auto_commit=True, serializer=persistqueue_json
        )
        if durability == "normal":
            for conn in (self.queue._getter, self.queue._putter):
                conn.execute("PRAGMA synchronous=NORMAL")

    def push(self, obj):
        self.queue.put(obj)

    def pull_finish(self):
        try:
            item = self.queue.get(block=False, raw=True)
        except persistqueue.Empty:
            return None
        self.queue.ack(id=item["pqid"])
        return item["data"]

    def left(self):
        return self.queue.ready_count() + self.queue.unack_count()

    def close(self):
        self.queue = None


class Binding:
    name = "tq"

    def __init__(self, file, durability):
        self.queue = tq.Queue(file, durability=durability)
        self.cancel = tq.Cancel()

    def push(self, obj):
        self.queue.push(obj)

    def push_many(self, objs):
        self.queue.push_many(objs)

    def pull_finish(self):
        task = self.queue.pull()
        if task is None:
            return None
        obj = task.payload
        task.finish()
        return obj

    def drain(self, deliver):
        task = self.queue.pull()
        while task is not None:
            deliver(task.payload)
            task = task.finish_and_pull()

    def drain_batches(self, deliver):
        while tasks := self.queue.pull_many(PULL_BATCH):
            for task in tasks:
                deliver(task.payload)
            self.queue.finish_many(tasks)

    def consume(self, deliver, done):
        try:
            task = self.queue.pull(timeout=math.inf, cancel=self.cancel)
            while True:
                if deliver(task.payload):
                    task.finish()
                    self.cancel.trigger()  # the other consumers stop waiting
                    return
                task = task.finish_and_pull(timeout=math.inf, cancel=self.cancel)
        except tq.Interrupted:
            return

    def consume_plain(self, deliver, done):
        try:
            while True:
                task = self.queue.pull(timeout=math.inf, cancel=self.cancel)
                last = deliver(task.payload)
                task.finish()
                if last:
                    self.cancel.trigger()  # the other consumers stop waiting
                    return
        except tq.Interrupted:
            return

    def left(self):
        return sum(self.queue.counts().values())

    def close(self):
        self.queue.close()


class Ctypes:
    """libtq through ctypes alone: what any binding must at least spend."""

    name = "ctypes"

    def __init__(self, file, durability):
        self.lib = _native.lib
        self.handle = _native.QUEUE_P()
        options = self.lib.tq_options_new()
        self.check(self.lib.tq_options_set_durability(options, tq.Durability[durability.upper()]))
        status = self.lib.tq_open(os.fsencode(file), options, ctypes.byref(self.handle))
        self.lib.tq_options_free(options)
        self.check(status)

    def check(self, status):
        if status < 0:
            fail(f"libtq: {self.lib.tq_last_error().decode()}")
        return status

    def payload_of(self, task):
        length = ctypes.c_size_t()
        return json.loads(
            ctypes.string_at(self.lib.tq_task_payload(task, ctypes.byref(length)), length.value)
        )

    def push(self, obj):
        data = json.dumps(obj).encode()
        task_id = ctypes.c_int64()
        self.check(self.lib.tq_push(self.handle, data, len(data), None, ctypes.byref(task_id)))

    def push_many(self, objs):
        datas = [json.dumps(obj).encode() for obj in objs]
        count = len(datas)
        ids = (ctypes.c_int64 * count)()
        self.check(
            self.lib.tq_push_batch(
                self.handle,
                (ctypes.c_char_p * count)(*datas),
                (ctypes.c_size_t * count)(*map(len, datas)),
                count,
                None,
                ids,
            )
        )

    def pull_finish(self):
        task = _native.TASK_P()
        if self.check(self.lib.tq_pull(self.handle, None, ctypes.byref(task))) == 1:
            return None
        obj = self.payload_of(task)
        status = self.lib.tq_finish(self.handle, task)
        self.lib.tq_task_free(task)
        self.check(status)
        return obj

    def drain(self, deliver):
        task = _native.TASK_P()
        status = self.check(self.lib.tq_pull(self.handle, None, ctypes.byref(task)))
        while status == 0:
            deliver(self.payload_of(task))
            following = _native.TASK_P()
            status = self.lib.tq_finish_and_pull(self.handle, task, None, ctypes.byref(following))
            self.lib.tq_task_free(task)
            self.check(status)
            task = following

    def drain_batches(self, deliver):
        slots = (_native.TASK_P * PULL_BATCH)()
        statuses = (ctypes.c_int32 * PULL_BATCH)()
        count = ctypes.c_size_t()
        while (
            self.check(self.lib.tq_pull_batch(self.handle, None, PULL_BATCH, slots, ctypes.byref(count))) == 0
        ):
            for index in range(count.value):
                deliver(self.payload_of(slots[index]))
            status = self.lib.tq_finish_batch(self.handle, slots, count.value, statuses)
            for index in range(count.value):
                self.lib.tq_task_free(slots[index])
            self.check(status)
            if any(statuses[index] != 0 for index in range(count.value)):
                fail("ctypes: a task of a batch was not held")

    def left(self):
        total = 0
        for state in tq.State:
            count = ctypes.c_int64()
            self.check(self.lib.tq_count(self.handle, state, ctypes.byref(count)))
            total += count.value
        return total

    def close(self):
        self.lib.tq_close(self.handle)


# --- Scenarios: each returns operations per second ---------------------------


def timed(work):
    start = time.perf_counter()
    work()
    return time.perf_counter() - start


def verify(subject, delivered, ops):
    indices = sorted(obj["index"] for obj in delivered)
    if indices != list(range(ops)):
        fail(f"{subject.name}: the tasks delivered are not each pushed task once")
    if any(obj != payload(obj["index"]) for obj in delivered):
        fail(f"{subject.name}: a payload came back changed")
    if subject.left():
        fail(f"{subject.name}: {subject.left()} tasks left after the drain")


def push_then_pull_finish(subject, ops):
    """Push from one thread, then pull+finish from one thread: two rates."""
    push_seconds = timed(lambda: [subject.push(payload(i)) for i in range(ops)])
    delivered = []

    def drain():
        for _ in range(ops):
            obj = subject.pull_finish()
            if obj is None:
                fail(f"{subject.name}: nothing to pull with tasks pending")
            delivered.append(obj)

    drain_seconds = timed(drain)
    verify(subject, delivered, ops)
    return ops / push_seconds, ops / drain_seconds


def run_threads(targets, stop):
    """Runs each target in its own thread; returns the seconds until all end.
    The first exception in a thread sets ``stop`` (for loops that would wait
    for the failed thread's work) and is raised once all threads ended."""
    errors = []

    def guarded(target):
        try:
            target()
        except BaseException as error:  # raised again in the main thread
            errors.append(error)
            stop()

    threads = [threading.Thread(target=guarded, args=(target,)) for target in targets]

    def start_all():
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    seconds = timed(start_all)
    if errors:
        raise errors[0]
    return seconds


def worker_loop(subject, ops, threads):
    """The subject's worker loop from ``threads`` threads over tasks pushed
    beforehand."""
    for i in range(ops):
        subject.push(payload(i))
    delivered = []
    seconds = run_threads([lambda: subject.drain(delivered.append)] * threads, lambda: None)
    verify(subject, delivered, ops)
    return ops / seconds


def drain_threads(subject, ops, threads):
    """pull then finish, one task at a time, from ``threads`` threads over
    tasks pushed beforehand."""
    for i in range(ops):
        subject.push(payload(i))
    delivered = []

    def drain():
        while (obj := subject.pull_finish()) is not None:
            delivered.append(obj)

    seconds = run_threads([drain] * threads, lambda: None)
    verify(subject, delivered, ops)
    return ops / seconds


def producers_and_consumers(subject, ops, plain=False):
    """2 threads push half the tasks each while 2 threads work on them,
    with the plain calls or the subject's best."""
    delivered = []
    lock = threading.Lock()
    failed = threading.Event()

    def produce(first):
        for i in range(first, ops, 2):
            subject.push(payload(i))

    def deliver(obj):
        with lock:
            delivered.append(obj)
            return len(delivered) == ops

    def done():
        return failed.is_set() or len(delivered) >= ops

    def consume():
        (subject.consume_plain if plain else subject.consume)(deliver, done)

    def stop():
        failed.set()
        if isinstance(subject, Binding):
            subject.cancel.trigger()

    seconds = run_threads([lambda: produce(0), lambda: produce(1), consume, consume], stop)
    verify(subject, delivered, ops)
    return ops / seconds


def worker_helper(subject, ops, concurrency, producers):
    """Queue.work with a handler that reads each payload, over tasks pushed
    beforehand or by ``producers`` threads meanwhile; stopped once every
    task was delivered."""
    if not producers:
        subject.push_many([payload(i) for i in range(ops)])
    delivered = []
    lock = threading.Lock()
    stop = threading.Event()

    def handle(task):
        obj = task.payload
        with lock:
            delivered.append(obj)
            if len(delivered) == ops:
                stop.set()

    def produce(first):
        for i in range(first, ops, producers):
            subject.push(payload(i))

    def work():
        stats = subject.queue.work(handle, concurrency=concurrency, stop=stop)
        if stats != tq.WorkStats(finished=ops, failed=0, lost=0):
            fail(f"Queue.work: {stats}")

    producing = [lambda first=first: produce(first) for first in range(producers)]
    seconds = run_threads([work, *producing], stop.set)
    verify(subject, delivered, ops)
    return ops / seconds


def batch_push(subject, ops):
    """push_many in calls of PUSH_BATCH, then a batch drain (untimed)."""

    def push_all():
        for first in range(0, ops, PUSH_BATCH):
            subject.push_many([payload(i) for i in range(first, min(first + PUSH_BATCH, ops))])

    seconds = timed(push_all)
    delivered = []
    subject.drain_batches(delivered.append)
    verify(subject, delivered, ops)
    return ops / seconds


def batch_pull_finish(subject, ops):
    """pull_many and finish_many of PULL_BATCH tasks, pushed beforehand."""
    for first in range(0, ops, PUSH_BATCH):
        subject.push_many([payload(i) for i in range(first, min(first + PUSH_BATCH, ops))])
    delivered = []
    seconds = timed(lambda: subject.drain_batches(delivered.append))
    verify(subject, delivered, ops)
    return ops / seconds


# --- Running and reporting ---------------------------------------------------


def filesystem(directory):
    best = ("", "?")
    with open("/proc/self/mounts") as mounts:
        for line in mounts:
            _, mount_point, fs_type, *_ = line.split()
            if str(directory).startswith(mount_point) and len(mount_point) > len(best[0]):
                best = (mount_point, fs_type)
    return best[1]


def cpu_model():
    with open("/proc/cpuinfo") as cpuinfo:
        for line in cpuinfo:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.machine()


def load_average():
    return " ".join(f"{load:.2f}" for load in os.getloadavg())


def summary(rates):
    return statistics.median(rates), min(rates), max(rates)


def main():
    prototype_path, prototype = load_prototype()
    parent = Path(os.environ.get("TQ_BENCH_DIR", REPOSITORY / "target" / "bench-tmp"))
    parent.mkdir(parents=True, exist_ok=True)
    directory = Path(tempfile.mkdtemp(prefix="python-", dir=parent))
    synchronous = sqlite3.connect(":memory:").execute("PRAGMA synchronous").fetchone()[0]
    if synchronous != 2:
        fail(f"Python's sqlite3 opens connections at synchronous={synchronous}, not FULL (2)")

    print(f"machine:    {os.cpu_count()} CPUs, {cpu_model()}; load average {load_average()} at the start")
    print(f"directory:  {directory} ({filesystem(directory)})")
    print(f"python:     {platform.python_version()}, prototype on SQLite {sqlite3.sqlite_version}")
    if prototype is None:
        print(
            f"prototype:  none at {prototype_path}: its cells are skipped "
            "(give its path as argument or in TQ_PROTOTYPE)"
        )
    else:
        print(f"prototype:  {prototype_path}")
    print(f"tq:         libtq {tq.library_version()} from {tq.library_path}")
    if persistqueue is None:
        print(
            f"peer:       persist-queue is not installed: its cells are skipped "
            f"(pip install persist-queue=={PERSIST_QUEUE_VERSION}; make bench-python does)"
        )
    else:
        print(f"peer:       persist-queue {persistqueue.__version__} (SQLiteAckQueue, JSON, WAL), from PyPI")
    print("durability: the same for all: full = SQLite synchronous=FULL in WAL (the prototype's default),")
    print("            normal = synchronous=NORMAL (the prototype's connections set so by a subclass)")
    print(
        f"method:     {OPS} tasks per scenario ({BATCH_OPS} for batches), "
        f"median [min-max] ops/s over {RUNS} run(s)",
        flush=True,
    )

    names = ("prototype", "tq", "ctypes", "persist-queue")
    rates = {(d, scenario, name): [] for d in DURABILITIES for scenario in ALL_SCENARIOS for name in names}
    failures = {key: 0 for key in rates}
    files = iter(range(10**9))
    started = time.monotonic()
    # Who runs the one-thread and the multi-threaded scenarios.
    single = [Binding, Ctypes]
    threaded = [Binding]
    plain = [Binding]
    if prototype is not None:
        make_prototype = lambda file, durability: Prototype(prototype, file, durability)  # noqa: E731
        single.insert(0, make_prototype)
        threaded.insert(0, make_prototype)
        plain.insert(0, make_prototype)
    if persistqueue is not None:
        plain.append(PersistQueue)

    def measure(durability, make, scenario_names, work):
        """Runs scenarios on a fresh file; records their rates, or a failure
        of the queue itself (the file locked past the timeout, say)."""
        subject = make(str(directory / f"{next(files)}.db"), durability)
        try:
            results = work(subject)
        except (sqlite3.Error, tq.Error, OSError) as error:
            for scenario in scenario_names:
                failures[(durability, scenario, subject.name)] += 1
            print(
                f"{durability}: {subject.name} failed in {' and '.join(scenario_names)}: {error!r}",
                file=sys.stderr,
            )
            return
        finally:
            subject.close()
        for scenario, rate in zip(scenario_names, results, strict=True):
            rates[(durability, scenario, subject.name)].append(rate)

    try:
        for durability in DURABILITIES:
            for run in range(RUNS):
                for make in plain:
                    measure(
                        durability,
                        make,
                        [PLAIN_PUSH],
                        lambda subject: [push_then_pull_finish(subject, OPS)[0]],
                    )
                    measure(durability, make, [PLAIN_DRAIN_ONE], lambda subject: [drain_threads(subject, OPS, 1)])
                    measure(durability, make, [PLAIN_DRAIN], lambda subject: [drain_threads(subject, OPS, THREADS)])
                    measure(
                        durability,
                        make,
                        [PLAIN_MIXED],
                        lambda subject: [producers_and_consumers(subject, OPS, plain=True)],
                    )
                for make in single:
                    measure(
                        durability,
                        make,
                        [PUSH, PULL_FINISH],
                        lambda subject: push_then_pull_finish(subject, OPS),
                    )
                    measure(durability, make, [LOOP], lambda subject: [worker_loop(subject, OPS, 1)])
                for make in threaded:
                    measure(
                        durability, make, [LOOP_THREADS], lambda subject: [worker_loop(subject, OPS, THREADS)]
                    )
                    measure(
                        durability,
                        make,
                        [PRODUCERS_CONSUMERS],
                        lambda subject: [producers_and_consumers(subject, OPS)],
                    )
                measure(
                    durability, Binding, [WORK_DRAIN], lambda subject: [worker_helper(subject, OPS, THREADS, 0)]
                )
                measure(durability, Binding, [WORK_MIXED], lambda subject: [worker_helper(subject, OPS, 2, 2)])
                for make in (Binding, Ctypes):
                    measure(durability, make, [BATCH_PUSH], lambda subject: [batch_push(subject, BATCH_OPS)])
                    measure(
                        durability,
                        make,
                        [BATCH_PULL],
                        lambda subject: [batch_pull_finish(subject, BATCH_OPS)],
                    )
                print(f"{durability}: run {run + 1}/{RUNS} done", file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(directory, ignore_errors=True)

    def cell(key):
        text = "-"
        if rates[key]:
            median, low, high = summary(rates[key])
            text = f"{median:.0f} [{low:.0f}-{high:.0f}]"
        if failures[key]:
            text += f" ({failures[key]} failed)"
        return text

    def ratio(numerator, denominator, unit=""):
        if not rates[numerator] or not rates[denominator]:
            return "-"
        return f"{summary(rates[numerator])[0] / summary(rates[denominator])[0]:.2f}{unit}"

    print("\nThe plain calls (push; pull, then finish), tasks/s; ratios of medians")
    print(
        f"{'workload':<50} {'prototype':>22} {'tq':>22} {'persist-queue':>22}"
        f" {'tq/prototype':>13} {'tq/persist-queue':>17}"
    )
    for durability in DURABILITIES:
        for scenario in PLAIN_SCENARIOS:
            key = {name: (durability, scenario, name) for name in names}
            print(
                f"{durability + ': ' + scenario:<50} {cell(key['prototype']):>22} {cell(key['tq']):>22}"
                f" {cell(key['persist-queue']):>22} {ratio(key['tq'], key['prototype'], 'x'):>13}"
                f" {ratio(key['tq'], key['persist-queue'], 'x'):>17}"
            )
    for durability in DURABILITIES:
        print()
        print(
            f"{durability + ', ops/s':<31} {'prototype':>24} {'tq':>24} {'ctypes':>24}"
            f" {'tq/prototype':>13} {'tq/ctypes':>10}"
        )
        for scenario in SCENARIOS:
            key = {name: (durability, scenario, name) for name in names}
            reference = (durability, PROTOTYPE_STAND_IN.get(scenario, scenario), "prototype")
            print(
                f"{scenario:<31} {cell(key['prototype']):>24} {cell(key['tq']):>24} {cell(key['ctypes']):>24}"
                f" {ratio(key['tq'], reference, 'x'):>13} {ratio(key['tq'], key['ctypes']):>10}"
            )
    print(f"\nThe worker helper against the prototype's plain loop it replaces, tasks/s")
    print(f"{'workload':<50} {'prototype':>22} {'tq':>22} {'tq/prototype':>13}")
    for durability in DURABILITIES:
        for scenario, replaced in WORK_SCENARIOS.items():
            tq_key = (durability, scenario, "tq")
            prototype_key = (durability, replaced, "prototype")
            print(
                f"{durability + ': ' + scenario:<50} {cell(prototype_key):>22} {cell(tq_key):>22}"
                f" {ratio(tq_key, prototype_key, 'x'):>13}"
            )
    elapsed = time.monotonic() - started
    print(
        f"\n({elapsed:.0f} s; load average {load_average()} at the end. pull+finish is two commits per task, "
        "a worker loop one;\nthe batch rows' tq/prototype compares with the prototype's push and pull+finish)"
    )


if __name__ == "__main__":
    main()
