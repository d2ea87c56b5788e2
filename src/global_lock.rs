//! Taking the locks a process's threads share, in a way that a child
//! forked in the middle of a tq call never waits for forever.
//!
//! Design: `docs/internals.md`, "Process-wide locks and fork()".

use std::ffi::c_int;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard, Once, TryLockError};
use std::thread;
use std::time::{Duration, Instant};

use crate::error::{Error, ErrorKind, Result};

/// How long a forked child waits for a lock before concluding that a
/// thread of its parent held it at `fork()` and will never let go. The
/// locks taken here are held for microseconds, never across I/O.
const FORKED_WAIT: Duration = Duration::from_secs(1);

/// The process that first took a lock through [`lock`] (0 before): in a
/// child, its parent's (or an earlier ancestor's) id, copied by `fork()`.
static FIRST_PID: AtomicU32 = AtomicU32::new(0);

/// Locks `mutex`; fails only in a forked child where the lock stays taken
/// for [`FORKED_WAIT`] (see the module documentation). A poisoned lock is
/// taken anyway: every lock taken here guards data that a panic cannot
/// leave half-changed.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> Result<MutexGuard<'_, T>> {
    // `getpid` is a system call: it is made once per process here, and
    // otherwise only on the contended path.
    if FIRST_PID.load(Ordering::Relaxed) == 0 {
        first_use();
    }
    match mutex.try_lock() {
        Ok(guard) => return Ok(guard),
        Err(TryLockError::Poisoned(poisoned)) => return Ok(poisoned.into_inner()),
        Err(TryLockError::WouldBlock) => {}
    }
    if std::process::id() == FIRST_PID.load(Ordering::Relaxed) {
        return Ok(mutex
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()));
    }
    let deadline = Instant::now() + FORKED_WAIT;
    loop {
        thread::sleep(Duration::from_micros(100));
        match mutex.try_lock() {
            Ok(guard) => return Ok(guard),
            Err(TryLockError::Poisoned(poisoned)) => return Ok(poisoned.into_inner()),
            Err(TryLockError::WouldBlock) if Instant::now() < deadline => {}
            Err(TryLockError::WouldBlock) => return Err(forked_mid_call()),
        }
    }
}

/// Records this process as the first, and makes SQLite's own locks safe
/// across `fork()` (see [`sqlite_locks_taken`]).
#[cold]
fn first_use() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        FIRST_PID.store(std::process::id(), Ordering::Relaxed);
        // SAFETY: the handlers only take and release SQLite's static
        // mutexes, on the forking thread.
        unsafe {
            libc::pthread_atfork(
                Some(sqlite_locks_taken),
                Some(sqlite_locks_released),
                Some(sqlite_locks_released),
            );
        }
    });
}

/// SQLite's process-wide mutexes that tq's calls meet in a child: the unix
/// VFS's (taken to open and close a file and to map a WAL index) and the
/// allocator's (taken by every allocation SQLite makes), in the order
/// SQLite nests them. They are plain pthread mutexes: taken before
/// `fork()` by the forking thread and released after it on both sides, so
/// a child never starts with them held by a thread it does not have. They
/// are held for microseconds at a time, never across I/O.
const SQLITE_STATIC_MUTEXES: [c_int; 2] = [
    rusqlite::ffi::SQLITE_MUTEX_STATIC_VFS1,
    rusqlite::ffi::SQLITE_MUTEX_STATIC_MEM,
];

extern "C" fn sqlite_locks_taken() {
    for id in SQLITE_STATIC_MUTEXES {
        // SAFETY: static mutexes exist for the life of the process.
        unsafe { rusqlite::ffi::sqlite3_mutex_enter(rusqlite::ffi::sqlite3_mutex_alloc(id)) };
    }
}

extern "C" fn sqlite_locks_released() {
    for id in SQLITE_STATIC_MUTEXES.into_iter().rev() {
        // SAFETY: taken by this thread in `sqlite_locks_taken`.
        unsafe { rusqlite::ffi::sqlite3_mutex_leave(rusqlite::ffi::sqlite3_mutex_alloc(id)) };
    }
}

/// The error of a call that needs what a thread of the parent was using
/// at `fork()`.
pub(crate) fn forked_mid_call() -> Error {
    Error::new(
        ErrorKind::InvalidArgument,
        "this process was forked while another thread was inside a tq call, and what \
         that thread held stays held here: a child can use tq only when fork() happened \
         while no other thread was inside a tq call",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    #[test]
    fn a_lock_held_by_another_thread_is_waited_for_in_the_first_process() {
        static SHARED: Mutex<u32> = Mutex::new(0);
        let (taken, release) = (mpsc::channel(), mpsc::channel::<()>());
        let holder = thread::spawn(move || {
            let mut guard = lock(&SHARED).unwrap();
            taken.0.send(()).unwrap();
            release.1.recv().unwrap();
            *guard += 1;
        });
        taken.1.recv().unwrap();
        let waiter = thread::spawn(|| *lock(&SHARED).unwrap());
        // Held far longer than a forked child would wait.
        thread::sleep(FORKED_WAIT + Duration::from_millis(200));
        release.0.send(()).unwrap();
        assert_eq!(
            waiter.join().unwrap(),
            1,
            "the waiter got the lock after the holder"
        );
        holder.join().unwrap();
    }
}
