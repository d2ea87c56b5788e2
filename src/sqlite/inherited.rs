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
use std::thread;
use std::time::{Duration, Instant};

use rusqlite::Connection;

use crate::error::{Error, ErrorKind, Result};

/// A connection and the process that opened it.
pub(super) struct Slot {
    opened_by_pid: u32,
    pub(super) conn: Mutex<Option<Connection>>,
}

/// Every live slot of this process (and, in a child, of its parent).
static SLOTS: Mutex<Vec<Weak<Slot>>> = Mutex::new(Vec::new());

/// How long to wait for the registry before concluding that a thread of the
/// parent held it at `fork()` and will never let go.
const REGISTRY_WAIT: Duration = Duration::from_secs(1);

/// Closes the connections this process inherited from a parent (none in a
/// process that never forked) and forgets slots that were dropped.
pub(super) fn close_inherited() -> Result<()> {
    let pid = std::process::id();
    let mut slots = lock_registry()?;
    let mut result = Ok(());
    slots.retain(|weak| {
        let Some(slot) = weak.upgrade() else {
            return false;
        };
        if slot.opened_by_pid == pid {
            return true;
        }
        match slot.conn.try_lock() {
            Ok(mut conn) => drop(conn.take()),
            Err(TryLockError::Poisoned(poisoned)) => drop(poisoned.into_inner().take()),
            // A thread of the parent was inside a tq call at fork(): its
            // connection is mid-use and cannot be closed safely.
            Err(TryLockError::WouldBlock) => result = Err(fork_error()),
        }
        true
    });
    result
}

/// Registers `conn` as opened by this process.
pub(super) fn register(conn: Connection) -> Result<Arc<Slot>> {
    let slot = Arc::new(Slot {
        opened_by_pid: std::process::id(),
        conn: Mutex::new(Some(conn)),
    });
    lock_registry()?.push(Arc::downgrade(&slot));
    Ok(slot)
}

/// The registry lock. In a child whose parent was opening a queue at the
/// moment of `fork()`, the lock is held by a thread that does not exist
/// there; waiting is bounded so that such a child gets an error, not a hang.
fn lock_registry() -> Result<std::sync::MutexGuard<'static, Vec<Weak<Slot>>>> {
    let deadline = Instant::now() + REGISTRY_WAIT;
    loop {
        match SLOTS.try_lock() {
            Ok(slots) => return Ok(slots),
            Err(TryLockError::Poisoned(poisoned)) => return Ok(poisoned.into_inner()),
            Err(TryLockError::WouldBlock) if Instant::now() < deadline => {
                thread::sleep(Duration::from_micros(100))
            }
            Err(TryLockError::WouldBlock) => return Err(fork_error()),
        }
    }
}

fn fork_error() -> Error {
    Error::new(
        ErrorKind::InvalidArgument,
        "this process was forked while another thread was inside a tq call, so the \
         connections it inherited cannot be closed safely: open queues in a child \
         only when fork() happened outside tq calls",
    )
}
