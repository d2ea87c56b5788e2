"""tq's SQLite extension in the application's own SQLite connection: push a
task in the same commit as the application's rows, and finish a held task in
the same commit as its result.

    import sqlite3
    import tq.sqlite

    conn = sqlite3.connect("shop.db", isolation_level=None)
    tq.sqlite.load(conn)
    with conn:
        conn.execute("BEGIN")
        conn.execute("INSERT INTO orders (id) VALUES (1)")
        conn.execute("SELECT tq_push('emails', json_object('order', 1))")

The extension is ``libtq_sqlite.so``; it needs SQLite 3.51.3 or later in the
connection's library and refuses older ones with its reason.
"""

import os
from pathlib import Path

from ._native import LIBRARY_PATH

#: The environment variable naming the extension library to load.
EXTENSION_ENV = "TQ_SQLITE_EXTENSION"
#: The extension's file name; SQLite derives its entry point
#: (``sqlite3_tqsqlite_init``) from it.
EXTENSION_NAME = "libtq_sqlite.so"


def extension_path() -> str:
    """Where ``load`` takes the extension from: ``TQ_SQLITE_EXTENSION`` when
    set, else beside the libtq this package loaded, else the bare file name,
    which the dynamic loader looks up on the system's library search path."""
    named = os.environ.get(EXTENSION_ENV)
    if named:
        return named
    # LIBRARY_PATH is a path when libtq came from TQ_LIBRARY or the
    # package, and the SONAME alone when it came from the search path.
    if os.sep in LIBRARY_PATH:
        beside = Path(LIBRARY_PATH).resolve().with_name(EXTENSION_NAME)
        if beside.exists():
            return str(beside)
    return EXTENSION_NAME


def load(conn, path: "str | None" = None) -> None:
    """Loads tq's SQLite extension into ``conn``, a stdlib ``sqlite3`` or an
    ``apsw`` connection: it gains the SQL functions ``tq_push(queue,
    payload[, options_json])`` and ``tq_finish(id, token[, keep_history])``,
    and tq's tables are created or migrated in its main database.

    ``path`` overrides ``extension_path()``. Loading extensions is enabled
    only for this call. Raises the connection's own error (``sqlite3.
    OperationalError``, ``apsw.ExtensionLoadingError``) with tq's reason,
    for one when the connection's SQLite is older than 3.51.3.
    """
    path = path or extension_path()
    conn.enable_load_extension(True)
    try:
        conn.load_extension(path)
    finally:
        conn.enable_load_extension(False)
