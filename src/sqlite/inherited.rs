//! Connections a child process inherits from its parent through `fork()`.
//!
//! SQLite keeps one lock record per open file per process and shares it
//! among that process's connections. A child gets a copy of its parent's
//! records, which claim locks that the child does not hold (POSIX locks do
//! not cross `fork()`). A connection the child then opens on the same file
//! joins the copied record and never takes the file locks it believes it
//! has: another process can then think itself the file's last user and
//! delete the WAL under it, losing the child's commits. So before a child
//! opens a file, the connections it inherited are closed. Closing them is
//! safe for the parent: a process can only release its own POSIX locks, and
//! the child holds none.

use std::sync::{Arc, Mutex, TryLockError, Weak};

use rusqlite::Connection;

use crate::error::Result;
use crate::global_lock;

/// A connection and the process that opened it.
pub(super) struct Slot {
    opened_by_pid: u32,
    pub(super) conn: Mutex<Option<Connection>>,
}

/// Every live slot of this process (and, in a child, of its parent). In a
/// child whose parent was opening a queue at the moment of `fork()`, the
/// lock is held by a thread that does not exist there: it is taken through
/// [`global_lock::lock`], so such a child gets an error, not a hang.
static SLOTS: Mutex<Vec<Weak<Slot>>> = Mutex::new(Vec::new());

/// Closes the connections this process inherited from a parent (none in a
/// process that never forked) and forgets slots that were dropped.
pub(super) fn close_inherited() -> Result<()> {
    let pid = std::process::id();
    let mut slots = global_lock::lock(&SLOTS)?;
    slots.retain(|slot| slot.strong_count() > 0);
    let inherited: Vec<Arc<Slot>> = slots
        .iter()
        .filter_map(Weak::upgrade)
        .filter(|slot| slot.opened_by_pid != pid)
        .collect();
    // A connection that a thread of the parent was using at fork() cannot
    // be closed safely, and that thread may hold SQLite's lock on its
    // file's shared memory, which closing any connection to the file
    // takes: all are closed, or none.
    let mut conns = Vec::with_capacity(inherited.len());
    for slot in &inherited {
        match slot.conn.try_lock() {
            Ok(conn) => conns.push(conn),
            Err(TryLockError::Poisoned(poisoned)) => conns.push(poisoned.into_inner()),
            Err(TryLockError::WouldBlock) => return Err(global_lock::forked_mid_call()),
        }
    }
    for mut conn in conns {
        drop(conn.take());
    }
    Ok(())
}

/// Registers `conn` as opened by this process.
pub(super) fn register(conn: Connection) -> Result<Arc<Slot>> {
    let slot = Arc::new(Slot {
        opened_by_pid: std::process::id(),
        conn: Mutex::new(Some(conn)),
    });
    global_lock::lock(&SLOTS)?.push(Arc::downgrade(&slot));
    Ok(slot)
}
