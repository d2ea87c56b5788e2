//! Keeping the WAL small: explicit checkpoints, and the upkeep that
//! restarts a log that readers always overlapping keep growing.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use rusqlite::Connection;

use super::{retry_busy, SharedFile};
use crate::error::{Error, ErrorKind, Result};

/// The writer looks at the WAL's size (a `stat()`) once every this many
/// commits...
const WAL_CHECK_EVERY: u64 = 32;

/// ...and when it has grown past this (SQLite's own checkpoints, run every
/// 4 MiB of log, could not restart it because readers were always using
/// it), runs a checkpoint that waits for those readers to move on. Four of
/// SQLite's checkpoint intervals: a log that a checkpoint restarts stays
/// well under it, so only a log readers keep from restarting reaches it
/// (the torture suite's "WAL's size under readers" scenario).
const WAL_RESTART_SIZE: u64 = 16 * 1024 * 1024;

/// How long that checkpoint first waits for readers before giving up until
/// the next check: short, because the writers wait with it. Each attempt
/// that finds readers still there doubles the wait, up to
/// [`WAL_RESTART_MAX_WAIT`]; one that restarts the log resets it. At most
/// a pause of this length per 16 MiB of log for the writers.
pub(super) const WAL_RESTART_WAIT: Duration = Duration::from_millis(100);

/// Readers that follow one another without a gap (monitoring loops) can
/// keep a log from restarting for a good part of a second...
const WAL_RESTART_MAX_WAIT: Duration = Duration::from_millis(400);

/// ...but a reader that keeps one transaction open cannot be waited out:
/// when two checkpoints in a row stop at the same place in the log, the
/// writer leaves the log alone this long: at most one 400 ms stall per
/// 10 s, 4 % of the writers' time, for a reader that may never end.
const WAL_RESTART_COOLDOWN: Duration = Duration::from_secs(10);

/// Where the WAL upkeep stands in this process.
pub(super) struct Upkeep {
    /// How long the next checkpoint waits for readers.
    pub(super) wait: Duration,
    /// No checkpoint is tried before this time.
    pub(super) not_before: Instant,
    /// Where in the log the last checkpoint that could not copy it all
    /// stopped: a reader's snapshot.
    pub(super) stopped_at: Option<i64>,
}

impl SharedFile {
    /// Copies the WAL into the database and truncates it, in this
    /// process's turn at the write lock like any write (or writers in other
    /// processes would keep it out), the turn and the lock waited for until
    /// one deadline. Returns whether a reader or writer kept part of the
    /// log.
    pub(super) fn checkpoint(&self) -> Result<bool> {
        self.with_writer(|conn| {
            let deadline = Instant::now() + self.busy_timeout;
            let _turn = self.page.as_ref().map(|page| page.turns().wait(deadline));
            retry_busy(conn, self.busy_timeout, deadline, |conn| {
                let busy: i64 =
                    conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |row| row.get(0))?;
                Ok(busy != 0)
            })
        })
    }

    /// The size of the `-wal` file (0 when there is none), read with
    /// `stat()`.
    pub(super) fn wal_file_size(&self) -> Result<u64> {
        match std::fs::metadata(format!("{}-wal", self.path)) {
            Ok(metadata) => Ok(metadata.len()),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(0),
            Err(err) => Err(Error::new(
                ErrorKind::Io,
                format!("cannot stat the WAL of '{}': {err}", self.path),
            )),
        }
    }

    /// Keeps the WAL from growing without bound under readers that always
    /// overlap (see [`WAL_RESTART_SIZE`]). Best effort: a checkpoint that
    /// cannot finish now is tried again at a later check.
    pub(super) fn wal_upkeep(&self, conn: &Connection) {
        if !self.wal_upkeep_due() {
            return;
        }
        let mut upkeep = self
            .upkeep
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if Instant::now() < upkeep.not_before {
            return;
        }
        // The checkpoint takes the write lock: it waits for a turn like any
        // writer, or writers in other processes would keep it out.
        let _turn = self
            .page
            .as_ref()
            .map(|page| page.turns().wait(Instant::now() + upkeep.wait));
        let outcome = truncate_wal(conn, upkeep.wait);
        upkeep.record(outcome);
        let _ = conn.busy_timeout(self.busy_timeout);
    }

    /// Counts a commit, and says whether it is one of the commits that
    /// look at the WAL's size ([`WAL_CHECK_EVERY`]) and found it at
    /// [`WAL_RESTART_SIZE`] or more; a size that cannot be read is left
    /// for a later check.
    fn wal_upkeep_due(&self) -> bool {
        if self.commits.fetch_add(1, Ordering::Relaxed) % WAL_CHECK_EVERY != WAL_CHECK_EVERY - 1 {
            return false;
        }
        !self
            .wal_file_size()
            .map_or(true, |size| size < WAL_RESTART_SIZE)
    }
}

/// Runs a checkpoint on `conn` that waits up to `wait` for readers.
/// TRUNCATE rather than RESTART: the file's size then measures the log
/// again, so the next check does not take a reused file for a long log.
/// The answer: busy, frames in the log, frames copied. It sets `conn`'s
/// busy timeout to `wait`, for the caller to set back.
fn truncate_wal(conn: &Connection, wait: Duration) -> rusqlite::Result<(i64, i64, i64)> {
    conn.busy_timeout(wait).and_then(|()| {
        conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |row| {
            Ok((
                row.get::<_, i64>(0)?,
                row.get::<_, i64>(1)?,
                row.get::<_, i64>(2)?,
            ))
        })
    })
}

impl Upkeep {
    /// Sets the next checkpoint's wait, and whether to leave the log alone
    /// for a while, after a checkpoint that ended with `outcome` (see
    /// [`truncate_wal`]).
    fn record(&mut self, outcome: rusqlite::Result<(i64, i64, i64)>) {
        match outcome {
            Ok((0, _, _)) => {
                self.wait = WAL_RESTART_WAIT;
                self.stopped_at = None;
            }
            // Two checkpoints in a row stopped where a reader's snapshot
            // begins: that reader holds its transaction open.
            Ok((_, log, copied)) if copied < log && self.stopped_at == Some(copied) => {
                self.not_before = Instant::now() + WAL_RESTART_COOLDOWN;
                self.wait = WAL_RESTART_WAIT;
                self.stopped_at = None;
            }
            // Readers were still moving on (or only just left the log).
            Ok((_, log, copied)) if log >= 0 => {
                self.wait = (self.wait * 2).min(WAL_RESTART_MAX_WAIT);
                self.stopped_at = (copied < log).then_some(copied);
            }
            // Another connection was checkpointing, or the lock was not
            // had: the next check tries again.
            _ => {}
        }
    }
}
