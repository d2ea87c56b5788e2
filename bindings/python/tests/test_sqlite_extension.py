"""tq's SQLite extension through ``tq.sqlite.load``: the application's own
connection (apsw, whose SQLite is new enough) commits its rows and its tasks
together, and a worker finishes a task in the same commit as its result."""

import json
import sqlite3
import sys

import pytest
from helpers import child_env

import tq
import tq.sqlite

apsw = pytest.importorskip("apsw", reason="apsw is not installed (pip install apsw==3.54.1.0; make setup does)")

EXTENSION = tq.sqlite.extension_path()
if "/" not in EXTENSION:
    pytest.skip(
        f"tq's SQLite extension is not built ({tq.sqlite.EXTENSION_NAME} is neither beside libtq nor named by "
        f"{tq.sqlite.EXTENSION_ENV}; make ext builds it)",
        allow_module_level=True,
    )

# Run by the worker: waits (a long timeout: it returns at the commit) for a
# task of the queue "emails", prints its payload, then prints whether
# another task is ready.
WORKER = """
import json, sys
import tq
with tq.Queue(sys.argv[1], queue="emails") as queue:
    print("ready", flush=True)
    task = queue.pull(timeout=120)
    print(json.dumps(task.payload), flush=True)
    task.finish()
    print(json.dumps(queue.pull() is None), flush=True)
"""


@pytest.fixture
def conn(path):
    """The application's apsw connection, with the extension loaded and an
    orders table."""
    connection = apsw.Connection(str(path))
    # As every connection sharing the file with tq's writers needs: without
    # it, a BEGIN IMMEDIATE meeting a worker's commit fails at once.
    connection.setbusytimeout(10_000)
    tq.sqlite.load(connection)
    connection.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, total INTEGER NOT NULL)")
    yield connection
    connection.close()


def place_order(conn, order_id, *, commit):
    """Inserts an order and pushes its receipt email in one transaction,
    then commits or rolls it back."""
    conn.execute("BEGIN IMMEDIATE")
    conn.execute("INSERT INTO orders (id, total) VALUES (?, 100)", (order_id,))
    (task_id,) = conn.execute("SELECT tq_push('emails', json_object('order', ?))", (order_id,)).fetchone()
    conn.execute("COMMIT" if commit else "ROLLBACK")
    return task_id


def test_a_worker_in_another_process_gets_exactly_the_committed_task(conn, path):
    import subprocess

    place_order(conn, 2, commit=False)
    worker = subprocess.Popen(
        [sys.executable, "-c", WORKER, str(path)], cwd="/", env=child_env(), stdout=subprocess.PIPE, text=True
    )
    try:
        assert worker.stdout.readline() == "ready\n"
        # The worker is waiting: the commit wakes it.
        place_order(conn, 1, commit=True)
        assert json.loads(worker.stdout.readline()) == {"order": 1}
        assert json.loads(worker.stdout.readline()) is True
        assert worker.wait(timeout=120) == 0
    finally:
        worker.kill()
        worker.wait()
    assert conn.execute("SELECT id FROM orders").fetchall() == [(1,)]


def test_a_worker_finishes_by_token_in_the_commit_of_its_result(conn, path):
    task_id = place_order(conn, 1, commit=True)
    conn.execute("CREATE TABLE receipts (order_id INTEGER PRIMARY KEY)")
    with tq.Queue(path, queue="emails") as queue:
        task = queue.pull()
        assert task.id == task_id and task.token != 0

        # Rolled back: the task stays held, and nothing is written.
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO receipts (order_id) VALUES (1)")
        assert conn.execute("SELECT tq_finish(?, ?)", (task.id, task.token)).fetchone() == (task_id,)
        conn.execute("ROLLBACK")
        assert queue.count(tq.State.LEASED) == 1

        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO receipts (order_id) VALUES (1)")
        conn.execute("SELECT tq_finish(?, ?)", (task.id, task.token))
        conn.execute("COMMIT")
        assert queue.count(tq.State.LEASED) == 0 and queue.task(task_id) is None
        assert conn.execute("SELECT order_id FROM receipts").fetchall() == [(1,)]

        # The delivery is no longer held: finishing it again is refused.
        with pytest.raises(apsw.SQLError, match="tq_finish: "):
            conn.execute("SELECT tq_finish(?, ?)", (task.id, task.token))
        with pytest.raises(tq.NotHeldError):
            task.finish()


def test_a_bad_payload_fails_with_tqs_message_and_writes_nothing(conn, path):
    with pytest.raises(apsw.SQLError, match="tq_push: .*JSON"):
        conn.execute("SELECT tq_push('emails', '{not json')")
    with tq.Queue(path, queue="emails") as queue:
        assert sum(queue.counts().values()) == 0


# Run by an interpreter whose sqlite3 module loads extensions: loads tq's
# extension into a stdlib connection and prints the error, then whether
# loading is still enabled after the call.
REFUSED = """
import sqlite3, sys
import tq.sqlite
conn = sqlite3.connect(sys.argv[1])
try:
    tq.sqlite.load(conn)
    print("loaded")
except sqlite3.OperationalError as error:
    print(error)
try:
    conn.execute("SELECT load_extension('no such file')")
except sqlite3.OperationalError as error:
    print(error)
"""


def stdlib_that_loads_extensions():
    """An interpreter whose stdlib sqlite3 can load extensions (this one,
    else the system's python3, whose SQLite is Debian's), with its SQLite
    version; None when there is none."""
    import shutil
    import subprocess

    for python in dict.fromkeys([sys.executable, shutil.which("python3", path="/usr/bin")]):
        if python is None:
            continue
        asked = subprocess.run(
            [python, "-c", "import sqlite3; print(sqlite3.sqlite_version, hasattr(sqlite3.Connection, 'enable_load_extension'))"],
            capture_output=True,
            text=True,
        )
        version, loads = asked.stdout.split() if asked.returncode == 0 else ("", "False")
        if loads == "True":
            return python, version
    return None


def test_the_stdlib_sqlite3_older_than_3_51_3_is_refused_with_tqs_message(path):
    import subprocess

    found = stdlib_that_loads_extensions()
    if found is None:
        pytest.skip("no Python here has a stdlib sqlite3 that can load extensions")
    python, version = found
    if tuple(map(int, version.split("."))) >= (3, 51, 3):
        pytest.skip(f"the stdlib's SQLite ({python}) is {version}, not older than 3.51.3")
    child = subprocess.run(
        [python, "-c", REFUSED, str(path)], cwd="/", env=child_env(), capture_output=True, text=True, timeout=60
    )
    assert child.returncode == 0, child.stderr
    refusal, afterwards = child.stdout.splitlines()
    assert "too old: tq needs 3.51.3 or later" in refusal
    # Loading is enabled for the call only.
    assert afterwards == "not authorized"
