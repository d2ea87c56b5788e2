//! The SQLite backend: one file, WAL mode, shared by the handles of a
//! process.
//!
//! Design: `docs/internals.md`, "The SQLite backend".

mod attempts;
mod cancel;
mod claim;
mod commands;
pub(crate) mod commit_rings;
mod connect;
mod events;
mod fair;
pub(crate) mod finish;
mod flush;
pub(crate) mod ids;
mod inherited;
mod list;
mod page;
pub(crate) mod push;
#[cfg(test)]
mod query_plans;
mod recover;
mod schedules;
pub(crate) mod schema;
mod settings;
pub(crate) mod steps;
mod store;
mod turns;
mod wake;
mod wal;

use std::os::unix::fs::MetadataExt;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, OnceLock, TryLockError};
use std::thread;
use std::time::{Duration, Instant};

use rusqlite::Connection;

use crate::error::{Error, ErrorKind, Result};
use crate::group::Group;
use crate::holder::ProcessId;
use crate::options::{Durability, OpenOptions};
use crate::registry::Registry;
use crate::store::cancellations_channel;
use crate::wait::Bell;
use commands::{Op, Output};
pub(crate) use connect::{check_sqlite_version, enable_wal};
use wal::{Upkeep, WAL_RESTART_WAIT};

/// Longest pause between two tries for the write lock.
const MAX_BACKOFF: Duration = Duration::from_millis(20);

/// A handle on one named queue: the file it shares, and its own settings.
pub(crate) struct SqliteStore {
    file: Arc<SharedFile>,
    /// The named queue this handle works on.
    queue: String,
    keep_history: bool,
}

/// What the handles of this process on one file share.
pub(crate) struct SharedFile {
    /// The connection every write goes through; `None` once closed in a
    /// child after fork.
    writer: Arc<inherited::Slot>,
    /// The connection for reads, which never write.
    reader: Arc<inherited::Slot>,
    group: Group<Op, Output>,
    /// At `full`, makes each write durable before it returns; `None` at
    /// `normal`, and at `full` when SQLite flushes in each commit instead
    /// (see `flush::Flusher::new`).
    flusher: Option<flush::Flusher>,
    /// The page shared with the other processes using the file (see
    /// `page.rs`): fair turns at the write lock among processes (see
    /// `turns.rs`), and the wake words (see `wake.rs`); `None` when the
    /// page could not be mapped.
    page: Option<Arc<page::SharedPage>>,
    /// Rings this process's bells of the file when other processes ring
    /// the wake words; started by the first wait.
    watcher: wake::Watcher,
    busy_timeout: Duration,
    /// The database file's path as SQLite resolved it.
    path: String,
    /// The file's device and inode numbers.
    file_id: (u64, u64),
    /// This process's row in `tq_holders`, recorded by its first claim.
    holder_id: OnceLock<i64>,
    process: ProcessId,
    commits: AtomicU64,
    upkeep: Mutex<Upkeep>,
}

/// Which handles share a [`SharedFile`]: those on the same file (device and
/// inode), with the same durability and busy timeout, in the same process.
type FileKey = (u64, u64, Durability, Duration, u32);

/// The key under which the handles of this process on the file that
/// `metadata` describes, opened with `options`, share it.
fn file_key(metadata: &std::fs::Metadata, options: &OpenOptions) -> FileKey {
    (
        metadata.dev(),
        metadata.ino(),
        options.durability,
        options.busy_timeout,
        std::process::id(),
    )
}

/// The shared files of this process.
static FILES: Registry<FileKey, SharedFile> = Registry::new();

impl SqliteStore {
    /// Opens (creating if needed) the queue in the SQLite file at `path`.
    ///
    /// A file that is not an SQLite database, or carries a newer tq schema,
    /// is refused before anything is written to it.
    pub(crate) fn open(path: &str, options: &OpenOptions) -> Result<SqliteStore> {
        connect::check_sqlite_version(rusqlite::version_number())?;
        // Before connecting: a new connection would join the lock records
        // of connections copied from a parent process (see inherited.rs).
        inherited::close_inherited()?;
        // stat(), never open(): see SQLITE-NOTES on POSIX locks.
        let shared = match std::fs::metadata(path) {
            Ok(metadata) => FILES.find(&file_key(&metadata, options))?,
            Err(_) => None,
        };
        let file = match shared {
            Some(file) => file,
            None => SharedFile::open(path, options)?,
        };
        Ok(SqliteStore {
            file,
            queue: options.queue.clone(),
            keep_history: options.keep_history,
        })
    }

    /// The file's device and inode numbers: handles on one file share them.
    pub(crate) fn file_id(&self) -> (u64, u64) {
        self.file.file_id
    }

    /// Tells the waiters of other processes that this handle's queue may
    /// have a task to claim: after a committed write that can make one
    /// claimable.
    fn ring_other_processes(&self) {
        if let Some(page) = &self.file.page {
            page.wake_words().ring(&self.queue);
        }
    }

    /// Tells the holders watching for cancellations of this handle's queue,
    /// in every process, that one was recorded: after it committed.
    fn ring_cancellation(&self) -> Result<()> {
        let channel = cancellations_channel(&self.queue);
        Bell::for_queue(self.file.file_id, &channel)?.ring();
        if let Some(page) = &self.file.page {
            page.wake_words().ring(&channel);
        }
        Ok(())
    }

    /// Runs `body` in a write transaction of its own; returns once it is
    /// durable.
    fn write<T>(&self, body: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        let (value, commit) = self.file.with_writer(|conn| {
            let committed = self.file.transaction(conn, body)?;
            self.file.wal_upkeep(conn);
            Ok(committed)
        })?;
        self.file.durable(commit)?;
        Ok(value)
    }

    /// Runs `op` on the reading connection, in one read transaction: its
    /// statements see one snapshot of the file, and take the WAL's read
    /// lock once (two `fcntl` calls) rather than once per statement.
    fn read<T>(&self, op: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        with_slot(&self.file.reader, |conn| {
            conn.prepare_cached("BEGIN")?.execute([])?;
            let result = op(conn);
            // Ending a read transaction changes nothing, whatever `op` did.
            let ended = conn.prepare_cached("COMMIT")?.execute([]);
            let value = result?;
            ended?;
            Ok(value)
        })
    }
}

impl SharedFile {
    /// Connects to the file at `path` and shares it in this process, or
    /// shares the one another thread made meanwhile. Connecting may wait
    /// seconds (turns, busy locks, a migration): it runs without the
    /// registry's lock, so that opens of other files go on meanwhile.
    fn open(path: &str, options: &OpenOptions) -> Result<Arc<SharedFile>> {
        let (writer, page) = connect::connect(path, options)?;
        let resolved = writer.path().unwrap_or(path).to_owned();
        let metadata = std::fs::metadata(&resolved)
            .map_err(|err| Error::new(ErrorKind::Io, format!("cannot stat '{resolved}': {err}")))?;
        let key = file_key(&metadata, options);
        let reader = connect::connect_reader(&resolved, options)?;
        let flusher = match options.durability {
            Durability::Full => flush::Flusher::new(&writer, &resolved)?,
            Durability::Normal => None,
        };
        let made = Arc::new(SharedFile {
            writer: inherited::register(writer)?,
            reader: inherited::register(reader)?,
            group: Group::default(),
            flusher,
            page: page.map(Arc::new),
            watcher: wake::Watcher::default(),
            busy_timeout: options.busy_timeout,
            path: resolved,
            file_id: (key.0, key.1),
            holder_id: OnceLock::new(),
            process: ProcessId::current(),
            commits: AtomicU64::new(0),
            upkeep: Mutex::new(Upkeep {
                wait: WAL_RESTART_WAIT,
                not_before: Instant::now(),
                stopped_at: None,
            }),
        });
        // Group commit and the holder id rely on one shared file per key:
        // if another thread made one meanwhile, that one is used, and the
        // one just made is closed unused.
        FILES.adopt(key, made)
    }

    /// Runs `body` in a write transaction (see [`write_transaction`]),
    /// after this process's turn at the write lock (see `turns.rs`). The
    /// busy timeout bounds both waits together: the turn's (short unless
    /// the processes ahead are slow, since a stalled turn is skipped), then
    /// the lock's, until one deadline. Returns
    /// the value with the commit to wait for before answering (see
    /// [`SharedFile::durable`]); `conn` is the writing connection.
    fn transaction<T>(
        &self,
        conn: &Connection,
        body: impl FnOnce(&Connection) -> Result<T>,
    ) -> Result<(T, flush::CommitNumber)> {
        if let Some(flusher) = &self.flusher {
            flusher.refuse_if_failed()?;
        }
        let changes_before = conn.total_changes();
        let value = {
            let deadline = Instant::now() + self.busy_timeout;
            let _turn = self.page.as_ref().map(|page| page.turns().wait(deadline));
            write_transaction(conn, self.busy_timeout, deadline, body)?
        };
        let commit = match &self.flusher {
            Some(flusher) => flusher.record_commit(conn.total_changes() != changes_before),
            None => 0,
        };
        Ok((value, commit))
    }

    /// Returns once the write transaction `commit` is on the disk: at
    /// once at `normal`, after a flush at `full` (see `flush.rs`). Called
    /// without the writing connection, so others commit meanwhile.
    fn durable(&self, commit: flush::CommitNumber) -> Result<()> {
        match &self.flusher {
            Some(flusher) => flusher.wait(commit),
            None => Ok(()),
        }
    }

    /// Runs `op` on the writing connection.
    fn with_writer<T>(&self, op: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        with_slot(&self.writer, op)
    }
}

/// Runs `op` on the connection of `slot`. A panic in an earlier call may
/// have left a transaction open; it is rolled back first so every call
/// starts clean.
fn with_slot<T>(slot: &inherited::Slot, op: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
    let guard = slot.conn.lock().unwrap_or_else(|poisoned| {
        slot.conn.clear_poison();
        poisoned.into_inner()
    });
    let conn = guard.as_ref().ok_or_else(|| {
        Error::invalid_argument(
            "this handle's connection was closed in a child process after fork()",
        )
    })?;
    if !conn.is_autocommit() {
        let _ = conn.execute_batch("ROLLBACK");
    }
    op(conn)
}

impl Drop for SharedFile {
    fn drop(&mut self) {
        // A connection still locked here is mid-use by a thread that is
        // either misusing the handle or, in a child after fork(), does not
        // exist: closing it could fail half-way, so it is left open.
        for slot in [&self.writer, &self.reader] {
            if let Err(TryLockError::WouldBlock) = slot.conn.try_lock() {
                std::mem::forget(Arc::clone(slot));
            }
        }
    }
}

/// Runs `body` in one `BEGIN IMMEDIATE` transaction: committed when it
/// returns `Ok`, rolled back (leaving nothing behind) when it returns an
/// error or the commit fails. Only taking the write lock is retried, until
/// `deadline` (see [`retry_busy`]), so `body` runs at most once.
fn write_transaction<T>(
    conn: &Connection,
    busy_timeout: Duration,
    deadline: Instant,
    body: impl FnOnce(&Connection) -> Result<T>,
) -> Result<T> {
    retry_busy(conn, busy_timeout, deadline, |conn| {
        conn.prepare_cached("BEGIN IMMEDIATE")?.execute([])?;
        Ok(())
    })?;
    ids::begin();
    let result = body(conn).and_then(|value| {
        ids::settle_deletions(conn)?;
        conn.prepare_cached("COMMIT")?.execute([])?;
        Ok(value)
    });
    if result.is_err() && !conn.is_autocommit() {
        let _ = conn.execute_batch("ROLLBACK");
    }
    result
}

/// Runs `op`, trying again with growing pauses while it fails with "busy",
/// until `deadline`: the end of the call's busy timeout, part of which an
/// earlier wait (a turn) may have used. SQLite's own busy handler waits
/// inside each try, as long as is left; this loop also covers the answers
/// it does not wait for (a WAL being recovered by another connection). The
/// connection's busy handler is set back to `busy_timeout` afterwards.
fn retry_busy<T>(
    conn: &Connection,
    busy_timeout: Duration,
    deadline: Instant,
    mut op: impl FnMut(&Connection) -> Result<T>,
) -> Result<T> {
    let mut backoff = Duration::from_millis(1);
    let result = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if let Err(err) = conn.busy_timeout(left) {
            break Err(err.into());
        }
        match op(conn) {
            Err(err) if err.kind() == ErrorKind::Busy => {
                let now = Instant::now();
                if now >= deadline {
                    break Err(Error::new(
                        ErrorKind::Busy,
                        format!(
                            "the database stayed locked past the busy timeout ({} ms): {}",
                            busy_timeout.as_millis(),
                            err.message()
                        ),
                    ));
                }
                thread::sleep(backoff.min(deadline - now));
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
            result => break result,
        }
    };
    let _ = conn.busy_timeout(busy_timeout);
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{NewTask, Store};
    use crate::task::Pushed;
    use crate::{OpenOptions, PushOptions, Queue};

    /// A queue file in `dir`, its path, and a queue on it.
    fn queue_in(dir: &tempfile::TempDir, busy_timeout: Duration) -> (String, Queue) {
        let path = dir.path().join("queue.db").to_str().unwrap().to_owned();
        let mut options = OpenOptions::new();
        options
            .durability(Durability::Normal)
            .busy_timeout(busy_timeout)
            .unwrap();
        let queue = Queue::open(&path, &options).unwrap();
        (path, queue)
    }

    /// Processes ahead in the turn line of the file at `path`: `count`
    /// turns taken now, each held `hold` in its turn (short of a stale one).
    fn turns_ahead(path: &str, count: usize, hold: Duration) -> Vec<thread::JoinHandle<()>> {
        let page = Arc::new(page::SharedPage::open(path).unwrap());
        let ahead = (0..count)
            .map(|_| {
                let page = Arc::clone(&page);
                thread::spawn(move || {
                    let _turn = page.turns().wait(Instant::now() + Duration::from_secs(30));
                    thread::sleep(hold);
                })
            })
            .collect();
        // Let each take its ticket.
        thread::sleep(Duration::from_millis(20));
        ahead
    }

    #[test]
    fn the_busy_timeout_bounds_the_turn_and_the_lock_together() {
        let dir = tempfile::tempdir().unwrap();
        let timeout = Duration::from_millis(200);
        let (path, queue) = queue_in(&dir, timeout);
        let other = Connection::open(&path).unwrap();
        other.execute_batch("BEGIN IMMEDIATE").unwrap();
        // A line of turns longer than the timeout, then a lock that stays taken.
        let ahead = turns_ahead(&path, 15, Duration::from_millis(30));
        let started = Instant::now();
        let err = queue.push("1", &PushOptions::new()).unwrap_err();
        let took = started.elapsed();
        assert_eq!(err.kind(), ErrorKind::Busy, "{err}");
        // A generous bound: waiting for each in turn takes twice the timeout.
        assert!(took < timeout * 2, "busy after {took:?}");
        other.execute_batch("ROLLBACK").unwrap();
        for turn in ahead {
            turn.join().unwrap();
        }
        queue.push("1", &PushOptions::new()).unwrap();
    }

    /// The pages the WAL gained by `op`, on a checkpointed file.
    fn pages_written(queue: &Queue, op: impl FnOnce()) -> u64 {
        const WAL_HEADER: u64 = 32;
        const FRAME: u64 = 24 + 4096;
        assert!(queue.checkpoint().unwrap().complete);
        op();
        (queue.wal_size().unwrap() - WAL_HEADER) / FRAME
    }

    #[test]
    fn a_claim_and_its_finish_each_change_two_pages() {
        // At `normal` a commit costs about what it writes: each page changed
        // is a frame appended to the WAL. A claim moves one entry within
        // one index (ready to leased) and changes its row; a finish deletes
        // both. With few tasks leased, both entries share a page.
        let dir = tempfile::tempdir().unwrap();
        let (_, queue) = queue_in(&dir, Duration::from_secs(5));
        let payloads: Vec<String> = (0..2_000).map(|n| format!("{{\"n\":{n}}}")).collect();
        queue.push_batch(&payloads, &PushOptions::new()).unwrap();
        // The first claim also records this process as a holder.
        let first = queue.pull(&crate::PullOptions::new()).unwrap().unwrap();
        queue.finish(first.receipt()).unwrap();
        for _ in 0..3 {
            let mut task = None;
            let claim = pages_written(&queue, || {
                task = queue.pull(&crate::PullOptions::new()).unwrap();
            });
            let receipt = task.expect("a task to claim").receipt();
            let finish = pages_written(&queue, || queue.finish(receipt).unwrap());
            assert_eq!(
                (claim, finish),
                (2, 2),
                "pages written by a claim, by a finish"
            );
        }
    }

    #[test]
    fn a_push_changes_two_pages() {
        // Its row and its entry in the index of live tasks: the id comes
        // from the table itself (see ids.rs), not from a sequence table.
        let dir = tempfile::tempdir().unwrap();
        let (_, queue) = queue_in(&dir, Duration::from_secs(5));
        queue.push("0", &PushOptions::new()).unwrap();
        for n in 1..4 {
            let pages = pages_written(&queue, || {
                queue.push(&n.to_string(), &PushOptions::new()).unwrap();
            });
            assert_eq!(pages, 2, "pages written by a push");
        }
    }

    #[test]
    fn an_explicit_checkpoint_takes_a_turn_like_a_write() {
        let dir = tempfile::tempdir().unwrap();
        let (path, queue) = queue_in(&dir, Duration::from_secs(5));
        // Another process's view of the turns, sharing the page.
        let page = page::SharedPage::open(&path).unwrap();
        let tickets = || page.turns().next_ticket();
        let before = tickets();
        queue.push("1", &PushOptions::new()).unwrap();
        assert_eq!(tickets(), before + 1, "a write takes one turn");
        let checkpoint = queue.checkpoint().unwrap();
        assert!(checkpoint.complete);
        assert_eq!(tickets(), before + 2, "so does a checkpoint");
    }

    /// A handle on the default queue of the file at `path`.
    fn open(path: &str, durability: Durability) -> SqliteStore {
        open_queue(path, durability, crate::options::DEFAULT_QUEUE)
    }

    /// A handle on `queue` of the file at `path`.
    fn open_queue(path: &str, durability: Durability, queue: &str) -> SqliteStore {
        let mut options = OpenOptions::new();
        options.durability(durability).queue(queue).unwrap();
        SqliteStore::open(path, &options).unwrap()
    }

    /// A task ready at once, with a unique key if given.
    fn task(payload: &str, unique_key: Option<&str>) -> NewTask {
        NewTask {
            unique: unique_key.map(|key| (key.to_owned(), 0)),
            ..NewTask::ready(payload)
        }
    }

    /// A push of `task` to the queue of `store`, for a group.
    fn push_op(store: &SqliteStore, task: NewTask) -> Op {
        Op::Push {
            queue: store.queue.clone(),
            tasks: vec![task],
            now: 1,
        }
    }

    /// The value of `pragma` on the writing connection.
    fn writer_pragma(store: &SqliteStore, pragma: &str) -> i64 {
        store
            .file
            .with_writer(|conn| Ok(conn.pragma_query_value(None, pragma, |row| row.get(0))?))
            .unwrap()
    }

    #[test]
    fn a_group_rolled_back_whole_by_a_full_disk_reports_the_disk_to_every_write() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(
            dir.path().join("q.db").to_str().unwrap(),
            Durability::Normal,
        );
        store.push(vec![task("1", None)], 1).unwrap();
        // The file may not grow: SQLite answers SQLITE_FULL, as on a full
        // disk, and rolls back the whole transaction.
        let pages = writer_pragma(&store, "page_count");
        store
            .file
            .with_writer(|conn| Ok(conn.pragma_update(None, "max_page_count", pages)?))
            .unwrap();
        let large = format!("\"{}\"", "x".repeat(64 * 1024));
        let (results, _) = store.file.commit_group(vec![
            push_op(&store, task("2", None)),
            push_op(&store, task(&large, None)),
            push_op(&store, task("3", None)),
        ]);
        assert_eq!(results.len(), 3);
        for result in results {
            let err = result.err().expect("no write of the group was committed");
            assert_eq!(err.kind(), ErrorKind::Io, "{err}");
            assert!(err.message().contains("full"), "{err}");
        }
        assert_eq!(store.count(crate::task::TaskState::Pending).unwrap(), 1);
    }

    #[test]
    fn a_duplicate_answer_waits_for_a_flush_that_covers_what_it_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("q.db");
        let path = path.to_str().unwrap();
        let store = open(path, Durability::Full);
        // At `normal` this handle has a flusher of its own that never runs:
        // its commits stand for another process's, not yet on the disk.
        let other = open(path, Durability::Normal);
        let (results, own_commit) = store
            .file
            .commit_group(vec![push_op(&store, task("1", None))]);
        assert!(results[0].is_ok());
        store.file.durable(own_commit).unwrap();
        other.push(vec![task("2", Some("k"))], 1).unwrap();

        let (results, commit) = store
            .file
            .commit_group(vec![push_op(&store, task("3", Some("k")))]);
        let Ok(Output::Pushed(pushed)) = &results[0] else {
            panic!("the push failed");
        };
        assert!(matches!(pushed[..], [Pushed::Duplicate(_)]));
        assert!(
            commit > own_commit,
            "the duplicate waits for a flush after its read, not only for this process's commits"
        );
        store.file.durable(commit).unwrap();

        // An empty claim promises nothing about what it did not find: it
        // waits for no flush of its own.
        let empty = open_queue(path, Durability::Full, "empty");
        assert!(Arc::ptr_eq(&empty.file, &store.file));
        let claim_nothing = || {
            let claim = Op::Claim(empty.claim_args(1, 1, 1000));
            let (results, commit) = store.file.commit_group(vec![claim]);
            assert!(matches!(&results[0], Ok(Output::Tasks(tasks)) if tasks.is_empty()));
            commit
        };
        // The first claim records this process as a holder: a change.
        let registered = claim_nothing();
        store.file.durable(registered).unwrap();
        assert_eq!(claim_nothing(), registered);
    }

    #[test]
    fn a_vfs_not_known_to_allow_a_concurrent_flush_gets_sqlites_own_flush() {
        // A copy of the unix VFS under a name tq does not know.
        // SAFETY: the default VFS lives as long as the process; the copy is
        // leaked, since SQLite keeps the pointer as long.
        unsafe {
            let unix = rusqlite::ffi::sqlite3_vfs_find(std::ptr::null());
            let mut copy = *unix;
            copy.zName = c"tq-test-unknown".as_ptr();
            copy.pNext = std::ptr::null_mut();
            let copy = Box::leak(Box::new(copy));
            assert_eq!(rusqlite::ffi::sqlite3_vfs_register(copy, 0), 0);
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("q.db");
        let known = open(path.to_str().unwrap(), Durability::Full);
        assert!(known.file.flusher.is_some());
        assert_eq!(writer_pragma(&known, "synchronous"), 1, "NORMAL");
        drop(known);

        let uri = format!("file:{}?vfs=tq-test-unknown", path.display());
        let unknown = open(&uri, Durability::Full);
        assert!(unknown.file.flusher.is_none());
        assert_eq!(writer_pragma(&unknown, "synchronous"), 2, "FULL");
        let pushed = unknown.push(vec![task("1", None)], 1).unwrap();
        let claimed = unknown.claim(1, 1, 1000).unwrap();
        assert_eq!(claimed[0].id(), pushed[0].id());
    }
}
