//! Durability at `full` without holding the write lock through the flush.
//!
//! Design: `docs/internals.md`, "The flusher: durability without the lock".

use std::ffi::{c_int, CStr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rusqlite::{ffi, Connection};

use crate::error::{Error, ErrorKind, Result};

/// Points in the WAL are numbered from 1, in order, per process and file:
/// each write transaction's commit, and each read whose answer waits for a
/// flush (see [`Flusher::read_now`]); 0 stands for "none yet".
pub(super) type CommitNumber = u64;

/// The longest a flush waits for writes of this process that are queued or
/// committing: they are already there and take microseconds, unless they
/// wait for another process's write lock, and then waiting longer would
/// hold this flush for a wait of unknown length. `bench/concurrency.rs`
/// (pushes from 1 to 16 threads at `full`) measures the flushes it saves.
const PENDING_WAIT: Duration = Duration::from_millis(1);

/// The VFSs through which the WAL may be flushed while the writing
/// connection uses it in another thread (see [`WalFile`]): SQLite's unix
/// VFSs that support WAL, whose files' xSync is `unixSync`, and the
/// power-loss VFS of tq's torture tests, which runs `unixSync` and every
/// write under one lock.
const CONCURRENT_SYNC_VFS: &[&CStr] = &[c"unix", c"unix-excl", c"torture"];

pub(super) struct Flusher {
    /// The WAL as the writing connection holds it open.
    wal: WalFile,
    state: Mutex<FlushState>,
    /// Signalled when a flush ends, and when no write is pending.
    flushed: Condvar,
    /// Writes of this process submitted and not yet committed or failed.
    pending: AtomicUsize,
    /// The database's path, for messages.
    path: String,
}

struct FlushState {
    /// The last commit, or read, numbered.
    committed: CommitNumber,
    /// Every commit or read up to this one is on the disk.
    synced: CommitNumber,
    /// A thread is flushing.
    flushing: bool,
    /// Why a flush failed, once one has.
    failure: Option<String>,
}

/// SQLite's file object for the WAL of the writing connection.
#[derive(Clone, Copy)]
struct WalFile(*mut ffi::sqlite3_file);

// SAFETY: the file object belongs to the writing connection, which never
// leaves WAL mode and lives as long as the shared file owning this flusher
// (it is closed only when that is dropped, or in a child after fork(),
// where no thread of the parent runs). A flusher is made only for the VFSs
// of `CONCURRENT_SYNC_VFS`, whose sync is `unixSync`. That reads the
// descriptor and the path, which stay as opened, and the flags, which the
// connection changes only through file controls that tq never makes; it
// clears a flag at the first sync, which `Flusher::new` makes before any
// other thread can reach the file. When the flush fails, it also stores
// errno in the file's `lastErrno`, which the connection's thread stores
// after a failed read or write of its own and reads back at once to choose
// the error code: a data race on that one int. Its only effect, when a
// flush and a read or write of the WAL fail at the same moment, is that the
// read or write may be reported with the flush's errno (an I/O error for a
// full disk, say); it fails either way, and after a failed flush tq
// refuses every write to the file.
unsafe impl Send for WalFile {}
unsafe impl Sync for WalFile {}

impl Flusher {
    /// A flusher for the WAL of `conn`, the writing connection of the file
    /// at `path`, set up and not yet shared. Flushes what the set-up wrote.
    /// `None` when the connection's VFS is not known to allow a flush while
    /// the connection is in use (see [`CONCURRENT_SYNC_VFS`]): `conn` then
    /// runs at `synchronous=FULL`, so that SQLite flushes in each commit.
    pub(super) fn new(conn: &Connection, path: &str) -> Result<Option<Flusher>> {
        // SQLite opens the WAL at the first transaction in WAL mode: on a
        // file just switched from a rollback journal, that is this read.
        conn.query_row("PRAGMA schema_version", [], |_| Ok(()))?;
        let wal = wal_file(conn)?;
        sync(wal).map_err(|failure| {
            Error::new(
                ErrorKind::Io,
                format!("cannot flush the WAL of '{path}': {failure}"),
            )
        })?;
        if !vfs_allows_concurrent_sync(conn)? {
            conn.pragma_update(None, "synchronous", "FULL")?;
            return Ok(None);
        }
        Ok(Some(Flusher::of(wal, path)))
    }

    fn of(wal: WalFile, path: &str) -> Flusher {
        Flusher {
            wal,
            state: Mutex::new(FlushState {
                committed: 0,
                synced: 0,
                flushing: false,
                failure: None,
            }),
            flushed: Condvar::new(),
            pending: AtomicUsize::new(0),
            path: path.to_owned(),
        }
    }

    fn state(&self) -> MutexGuard<'_, FlushState> {
        // Each field is set in one step: a panic leaves no half-change.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Refuses a write once a flush has failed; called before a write
    /// transaction begins, so a refused write changes nothing.
    pub(super) fn refuse_if_failed(&self) -> Result<()> {
        match &self.state().failure {
            Some(failure) => Err(Error::new(
                ErrorKind::Io,
                format!(
                    "writes to '{}' are refused since an earlier flush of its WAL failed ({failure}): \
                     close every handle on the file and open it again",
                    self.path
                ),
            )),
            None => Ok(()),
        }
    }

    /// Counts a write submitted; [`Flusher::count_out`] counts it out once it
    /// has committed or failed.
    pub(super) fn count_in(&self) {
        self.pending.fetch_add(1, Ordering::SeqCst);
    }

    /// Counts out `count` writes begun, when dropped.
    pub(super) fn count_out(&self, count: usize) -> CountOut<'_> {
        CountOut {
            flusher: self,
            count,
            next_wait: 0,
        }
    }

    /// Records a commit of the writing connection and returns the number a
    /// caller waits for: the commit's own when it changed anything,
    /// otherwise the one before, which it may have read from. Called while
    /// the connection is still held, so numbers follow the log's order.
    pub(super) fn record_commit(&self, changed: bool) -> CommitNumber {
        let mut state = self.state();
        if changed {
            state.committed += 1;
        }
        state.committed
    }

    /// Returns the number to wait for when an answer rests on what the
    /// writing connection read, which may be another process's commit not
    /// yet on the disk: only a flush that begins after this call covers it
    /// (one flush covers every process's commits, the WAL being one file).
    /// Called after the read, while the connection is still held.
    pub(super) fn read_now(&self) -> CommitNumber {
        let mut state = self.state();
        state.committed += 1;
        state.committed
    }

    /// Returns once transaction `number` is on the disk, flushing the WAL
    /// if no other thread is.
    pub(super) fn wait(&self, number: CommitNumber) -> Result<()> {
        let mut state = self.state();
        let mut pending_since = None;
        loop {
            if state.synced >= number {
                return Ok(());
            }
            if let Some(failure) = &state.failure {
                return Err(Error::new(
                    ErrorKind::UnknownOutcome,
                    format!(
                        "the write was committed to '{}', but flushing it to the disk failed \
                         ({failure}): it may or may not survive a power loss",
                        self.path
                    ),
                ));
            }
            if state.flushing {
                state = self
                    .flushed
                    .wait(state)
                    .unwrap_or_else(|poisoned| poisoned.into_inner());
                continue;
            }
            if self.pending.load(Ordering::SeqCst) > 0 {
                let since = *pending_since.get_or_insert_with(Instant::now);
                if let Some(left) = (since + PENDING_WAIT).checked_duration_since(Instant::now()) {
                    state = self
                        .flushed
                        .wait_timeout(state, left)
                        .unwrap_or_else(|poisoned| poisoned.into_inner())
                        .0;
                    continue;
                }
            }
            let target = state.committed;
            state.flushing = true;
            drop(state);
            let outcome = sync(self.wal);
            state = self.state();
            state.flushing = false;
            match outcome {
                // One flush at a time: none ended since this one began.
                Ok(()) => state.synced = target,
                Err(failure) => state.failure = Some(failure),
            }
            self.flushed.notify_all();
        }
    }
}

/// Counts out writes begun (see [`Flusher::count_out`]).
pub(super) struct CountOut<'a> {
    flusher: &'a Flusher,
    count: usize,
    /// The commit this thread waits for next, if any.
    next_wait: CommitNumber,
}

impl CountOut<'_> {
    /// Tells that the writes were committed as `number`, which this thread
    /// waits for next (see [`Flusher::wait`]).
    pub(super) fn set_next_wait(&mut self, number: CommitNumber) {
        self.next_wait = number;
    }
}

impl Drop for CountOut<'_> {
    fn drop(&mut self) {
        let flusher = self.flusher;
        if flusher.pending.fetch_sub(self.count, Ordering::SeqCst) == self.count {
            // Under the lock, so that a flush deciding to wait cannot miss it.
            let state = flusher.state();
            // A flush waiting for these writes is left asleep when this
            // thread goes on to flush them itself (or to wait for a flush
            // running now, whose end wakes it): waking it would only put a
            // wake-up between the commit and the flush.
            if self.next_wait <= state.synced {
                flusher.flushed.notify_all();
            }
        }
    }
}

/// The WAL file object of `conn`.
fn wal_file(conn: &Connection) -> Result<WalFile> {
    let mut file: *mut ffi::sqlite3_file = std::ptr::null_mut();
    // SAFETY: a valid connection handle, and an out-pointer of the type
    // SQLITE_FCNTL_JOURNAL_POINTER writes (in WAL mode: the WAL's file).
    let rc = unsafe {
        ffi::sqlite3_file_control(
            conn.handle(),
            c"main".as_ptr(),
            ffi::SQLITE_FCNTL_JOURNAL_POINTER,
            (&mut file as *mut *mut ffi::sqlite3_file).cast(),
        )
    };
    // SAFETY: `file`, when not null, points at an open file object.
    if rc != ffi::SQLITE_OK || file.is_null() || unsafe { (*file).pMethods.is_null() } {
        return Err(Error::new(
            ErrorKind::Internal,
            "the writing connection has no open WAL to flush",
        ));
    }
    Ok(WalFile(file))
}

/// Whether `conn` opened its database through a VFS of
/// [`CONCURRENT_SYNC_VFS`].
fn vfs_allows_concurrent_sync(conn: &Connection) -> Result<bool> {
    let mut vfs: *mut ffi::sqlite3_vfs = std::ptr::null_mut();
    // SAFETY: a valid connection handle, and an out-pointer of the type
    // SQLITE_FCNTL_VFS_POINTER writes.
    let rc = unsafe {
        ffi::sqlite3_file_control(
            conn.handle(),
            c"main".as_ptr(),
            ffi::SQLITE_FCNTL_VFS_POINTER,
            (&mut vfs as *mut *mut ffi::sqlite3_vfs).cast(),
        )
    };
    // SAFETY: the VFS of an open connection stays valid while it is open,
    // and its name is a C string.
    if rc != ffi::SQLITE_OK || vfs.is_null() || unsafe { (*vfs).zName.is_null() } {
        return Err(Error::new(
            ErrorKind::Internal,
            "the writing connection has no VFS",
        ));
    }
    // SAFETY: as above.
    let name = unsafe { CStr::from_ptr((*vfs).zName) };
    Ok(CONCURRENT_SYNC_VFS.contains(&name))
}

/// Flushes the WAL to the disk, as SQLite's commit at `synchronous=FULL`
/// does.
fn sync(wal: WalFile) -> std::result::Result<(), String> {
    // SAFETY: see `WalFile`; xSync is set on every open file object.
    let rc: c_int = unsafe {
        let methods = &*(*wal.0).pMethods;
        let x_sync = methods.xSync.expect("a file object has xSync");
        x_sync(wal.0, ffi::SQLITE_SYNC_NORMAL)
    };
    if rc == ffi::SQLITE_OK {
        Ok(())
    } else {
        Err(format!(
            "{} (SQLite error {rc})",
            // SAFETY: sqlite3_errstr returns a static string for any code.
            unsafe { std::ffi::CStr::from_ptr(ffi::sqlite3_errstr(rc)) }.to_string_lossy()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicI32;
    use std::sync::Arc;
    use std::thread;

    /// A stand-in for the WAL: counts its syncs and answers with `ANSWER`.
    static SYNCS: AtomicUsize = AtomicUsize::new(0);
    static ANSWER: AtomicI32 = AtomicI32::new(ffi::SQLITE_OK);
    /// The tests share the stand-in: one at a time.
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

    unsafe extern "C" fn counted_sync(_: *mut ffi::sqlite3_file, _: c_int) -> c_int {
        SYNCS.fetch_add(1, Ordering::SeqCst);
        // Long enough for the other threads of a test to queue behind it.
        thread::sleep(Duration::from_millis(5));
        ANSWER.load(Ordering::SeqCst)
    }

    fn stand_in(answer: c_int) -> (Flusher, MutexGuard<'static, ()>) {
        let guard = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
        SYNCS.store(0, Ordering::SeqCst);
        ANSWER.store(answer, Ordering::SeqCst);
        // SAFETY: all-zero is a valid io_methods (every method None) and
        // sqlite3_file (a null pointer); both are leaked, so they outlive
        // the flusher.
        let methods: &'static mut ffi::sqlite3_io_methods =
            Box::leak(Box::new(unsafe { std::mem::zeroed() }));
        methods.xSync = Some(counted_sync);
        let file: &'static mut ffi::sqlite3_file =
            Box::leak(Box::new(unsafe { std::mem::zeroed() }));
        file.pMethods = methods;
        (Flusher::of(WalFile(file), "stand-in.db"), guard)
    }

    #[test]
    fn a_commit_waits_for_a_flush_and_one_flush_covers_every_commit_before_it() {
        let (flusher, _guard) = stand_in(ffi::SQLITE_OK);
        let first = flusher.record_commit(true);
        let second = flusher.record_commit(true);
        assert_eq!((first, second), (1, 2));
        flusher.wait(first).unwrap();
        flusher.wait(second).unwrap();
        assert_eq!(SYNCS.load(Ordering::SeqCst), 1, "one flush covered both");
        // A commit that changed nothing waits for the one before it, which
        // is on the disk already.
        assert_eq!(flusher.record_commit(false), 2);
        flusher.wait(2).unwrap();
        assert_eq!(SYNCS.load(Ordering::SeqCst), 1);
        let third = flusher.record_commit(true);
        flusher.wait(third).unwrap();
        assert_eq!(
            SYNCS.load(Ordering::SeqCst),
            2,
            "a later commit needs a flush of its own"
        );
    }

    #[test]
    fn a_read_waits_for_a_flush_that_begins_after_it() {
        let (flusher, _guard) = stand_in(ffi::SQLITE_OK);
        let commit = flusher.record_commit(true);
        flusher.wait(commit).unwrap();
        assert_eq!(SYNCS.load(Ordering::SeqCst), 1);
        // Every commit of this process is on the disk, but what the read
        // saw of another process's may not be.
        let read = flusher.read_now();
        flusher.wait(read).unwrap();
        assert_eq!(SYNCS.load(Ordering::SeqCst), 2);
        // A commit after the read is covered by a flush of its own.
        let later = flusher.record_commit(true);
        assert!(later > read);
        flusher.wait(later).unwrap();
        assert_eq!(SYNCS.load(Ordering::SeqCst), 3);
    }

    #[test]
    fn threads_waiting_together_share_flushes() {
        let (flusher, _guard) = stand_in(ffi::SQLITE_OK);
        let flusher = Arc::new(flusher);
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let flusher = Arc::clone(&flusher);
                thread::spawn(move || {
                    for _ in 0..10 {
                        let commit = flusher.record_commit(true);
                        flusher.wait(commit).unwrap();
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        let syncs = SYNCS.load(Ordering::SeqCst);
        assert!(syncs < 80, "80 commits took {syncs} flushes");
    }

    #[test]
    fn a_flush_waits_for_pending_writes_but_not_for_long() {
        let (flusher, _guard) = stand_in(ffi::SQLITE_OK);
        let commit = flusher.record_commit(true);
        flusher.count_in();
        let started = Instant::now();
        flusher.wait(commit).unwrap();
        assert!(
            started.elapsed() >= PENDING_WAIT,
            "it waited for the pending write"
        );
        drop(flusher.count_out(1));
        let commit = flusher.record_commit(true);
        flusher.wait(commit).unwrap();
        assert_eq!(SYNCS.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn a_failed_flush_fails_what_it_covered_and_refuses_later_writes() {
        let (flusher, _guard) = stand_in(ffi::SQLITE_OK);
        let flushed = flusher.record_commit(true);
        flusher.wait(flushed).unwrap();
        ANSWER.store(ffi::SQLITE_IOERR_FSYNC, Ordering::SeqCst);
        assert!(flusher.refuse_if_failed().is_ok());
        let commit = flusher.record_commit(true);
        let err = flusher.wait(commit).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::UnknownOutcome, "{err}");
        assert!(err.message().contains("may or may not survive"), "{err}");
        let refused = flusher.refuse_if_failed().unwrap_err();
        assert_eq!(refused.kind(), ErrorKind::Io, "{refused}");
        assert!(refused.message().contains("open it again"), "{refused}");
        // The commit flushed before the failure stays good.
        assert_eq!(SYNCS.load(Ordering::SeqCst), 2);
        assert!(flusher.wait(flushed).is_ok());
    }
}
