//! Scenario 7: the WAL under readers. Two producers push 32 KiB payloads
//! at `full` and a consumer finishes them, in three phases, while the
//! driver samples the `-wal` file: its size (with stat()) and its header's
//! first salt, which SQLite changes each time the log restarts from its
//! beginning (read with plain reads while the driver has no connection of
//! its own to the file):
//! 1. four reader processes monitor the queue through tq (counts in a
//!    loop, each a short read) while 96 MiB are pushed. tq's upkeep
//!    (README, "The write-ahead log") checks the log every 32 commits of
//!    a process and, past 16 MiB, takes a turn at the write lock and
//!    truncates the log once those readers have moved on; so the WAL must
//!    stay under [`MONITORED_BOUND`];
//! 2. another program holds a read snapshot open (as the sqlite3 shell
//!    left in a transaction would) while 64 MiB are pushed: no checkpoint
//!    can restart the log, which grows past 64 MiB (the figure is printed:
//!    nothing in tq can bound it while the snapshot lives);
//! 3. the snapshot ends and 6 MiB more are pushed, again while the WAL is
//!    still longer (a writer may be in its cooldown), for up to 30 s: the
//!    WAL is cut back to 64 MiB at most (SQLite's size limit after a
//!    restart, which tq sets);
//!    then, everyone gone, `checkpoint` answers complete and truncates it
//!    to nothing, as `wal_size` and the file agree.
//!
//! No push fails, and the checker finds nothing lost.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use tq::OpenOptions;

use super::checker::{verify_run, Expect};
use super::client::{self, Client};
use super::db::Target;
use super::harness::{child_args, now_ns, sleep_ms, spawn, Args, Dir, Proc, Rng, Settings};
use super::history::{Histories, History};

const PAD: usize = 32 * 1024;
const MIB: u64 = 1024 * 1024;
/// tq's `journal_size_limit`: the WAL is cut back to this when the log
/// restarts.
const JOURNAL_SIZE_LIMIT: u64 = 64 * MIB;
/// The bound the upkeep keeps under monitoring readers: past 16 MiB, each
/// writing process tries a checkpoint at every 32nd commit of its own until
/// one truncates the log. Three writers here add about 5 MiB of log
/// between two tries of one process (a commit writes about 13 frames of
/// 4 KiB), so 32 MiB leaves room for three failed tries in a row.
const MONITORED_BOUND: u64 = 32 * MIB;

/// The WAL as the sampler saw it during a phase.
#[derive(Clone, Copy, Default)]
struct Seen {
    peak: u64,
    /// Times the log restarted from its beginning.
    restarts: u64,
    /// MiB the producers pushed.
    pushed_mib: u64,
}

impl std::fmt::Display for Seen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "peak {} MiB, {} restarts of the log, for {} MiB pushed",
            self.peak / MIB,
            self.restarts,
            self.pushed_mib
        )
    }
}

/// Salt-1 of the WAL's header (bytes 16 to 19), if the file has a header:
/// each restart of the log writes a new one (the last plus one).
fn salt(wal: &str) -> Option<[u8; 4]> {
    use std::io::Read;
    let mut header = [0u8; 20];
    std::fs::File::open(wal)
        .ok()?
        .read_exact(&mut header)
        .ok()?;
    Some(header[16..20].try_into().unwrap())
}

/// Sets its flag when dropped.
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Starts children of the scenario.
struct Roles<'a> {
    db: &'a str,
    history_dir: &'a Path,
    rng: Rng,
    deadline: i64,
}

impl Roles<'_> {
    fn start(&mut self, role: &str, label: &str, extra: Args) -> Proc {
        let mut args = child_args(
            self.db,
            self.history_dir,
            label,
            self.rng.next(),
            self.deadline,
        );
        args.extend(extra);
        spawn(role, &args)
    }

    /// Two producers pushing `mib` MiB between them (in long mode, until
    /// the deadline), while the WAL is sampled.
    fn push(&mut self, phase: &str, mib: u64, long: bool) -> Seen {
        let count = if long {
            u64::MAX
        } else {
            mib * MIB / PAD as u64 / 2
        };
        let extra = || -> Args {
            vec![
                ("threads", "1".into()),
                ("pad", PAD.to_string()),
                ("count", count.to_string()),
            ]
        };
        let peak = AtomicU64::new(0);
        let restarts = AtomicU64::new(0);
        let stop = AtomicBool::new(false);
        let wal = format!("{}-wal", self.db);
        std::thread::scope(|scope| {
            scope.spawn(|| {
                // A restart needs a checkpoint of all the log first (SQLite's
                // own come every 4 MiB): two cannot fall between samples.
                let mut last = salt(&wal);
                while !stop.load(Ordering::Relaxed) {
                    if let Ok(meta) = std::fs::metadata(&wal) {
                        peak.fetch_max(meta.len(), Ordering::Relaxed);
                    }
                    let now = salt(&wal);
                    if now.is_some() && last.is_some() && now != last {
                        restarts.fetch_add(1, Ordering::Relaxed);
                    }
                    last = now.or(last);
                    sleep_ms(5);
                }
            });
            // Stops the sampler however this closure ends: the scope waits
            // for it, even to carry a panic on.
            let _stop_sampler = StopOnDrop(&stop);
            let mut producers = vec![
                self.start("producer", &format!("{phase}-a"), extra()),
                self.start("producer", &format!("{phase}-b"), extra()),
            ];
            for producer in &mut producers {
                let status = producer.wait_timeout(Duration::from_secs(3600));
                assert_eq!(status, Ok(Some(0)), "a producer of phase {phase}");
            }
        });
        let pushed: usize = ["a", "b"]
            .iter()
            .map(|p| {
                let history = Histories::read_process(self.history_dir, &format!("{phase}-{p}"));
                history
                    .ops
                    .iter()
                    .filter(|op| op.op == "push" && op.is_ok())
                    .count()
            })
            .sum();
        Seen {
            peak: peak.into_inner(),
            restarts: restarts.into_inner(),
            pushed_mib: pushed as u64 * PAD as u64 / MIB,
        }
    }
}

#[test]
#[ignore = "torture test: make test-torture"]
fn the_wal_stays_bounded_under_readers_and_shrinks_back_once_they_stop() {
    let settings = Settings::new("wal");
    let dir = Dir::new();
    let db = dir.file("queue.db");
    let history_dir = dir.sub("history");
    let driver = History::create(&history_dir, "driver");
    // In long mode each phase's producers push until its time is up.
    let phase = settings.duration(Duration::from_secs(3600));
    let long = settings.is_long();
    // The consumer runs through all three phases.
    let mut roles = Roles {
        db: &db,
        history_dir: &history_dir,
        rng: settings.rng(),
        deadline: now_ns() + 3 * phase.as_nanos() as i64 + 600_000_000_000,
    };
    let stop = |proc: &mut Proc, label: &str| {
        driver.info("kill", &format!("target={label}"));
        proc.kill();
    };
    let mut consumer = roles.start(
        "worker",
        "consumer",
        vec![
            ("threads", "1".into()),
            ("lease_min", "60000".into()),
            ("lease_max", "60000".into()),
            ("work_min", "0".into()),
            ("work_max", "0".into()),
        ],
    );

    roles.deadline = now_ns() + phase.as_nanos() as i64;
    let mut readers: Vec<Proc> = (0..4)
        .map(|n| roles.start("reader", &format!("r{n}"), Vec::new()))
        .collect();
    let monitored = roles.push("monitored", 96, long);
    for (n, reader) in readers.iter_mut().enumerate() {
        stop(reader, &format!("r{n}"));
    }

    roles.deadline = now_ns() + phase.as_nanos() as i64;
    let mut snapshot = roles.start("snapshot", "snapshot", Vec::new());
    assert!(
        super::harness::wait_until(Duration::from_secs(20), || {
            Histories::read_process(&history_dir, "snapshot")
                .events
                .iter()
                .any(|e| e.op == "snapshot")
        }),
        "the snapshot was never taken"
    );
    let pinned = roles.push("pinned", 64, long);
    stop(&mut snapshot, "snapshot");

    // A writer whose checkpoints twice in a row stopped at the same frame
    // leaves the log alone for a while (10 s, WAL_RESTART_COOLDOWN in
    // src/sqlite/wal.rs), and a busy machine can make the first ones after
    // the snapshot's end stop so: rounds of 6 MiB go on until the log is
    // cut back, for at most three such whiles.
    let released_since = std::time::Instant::now();
    let mut rounds = 0;
    let (released, end) = loop {
        roles.deadline = now_ns() + phase.as_nanos() as i64;
        let released = roles.push(&format!("released{rounds}"), 6, false);
        rounds += 1;
        let end = std::fs::metadata(format!("{db}-wal")).map_or(0, |m| m.len());
        if end <= JOURNAL_SIZE_LIMIT || released_since.elapsed() > Duration::from_secs(30) {
            break (released, end);
        }
    };
    stop(&mut consumer, "consumer");

    // Everyone gone: an explicit checkpoint empties the log.
    let queue = client::open(&driver, 0, &db, &OpenOptions::new()).expect("open");
    let checkpoint = Client {
        queue: &queue,
        history: &driver,
        thread: 0,
    }
    .checkpoint()
    .expect("checkpoint");
    let (reported, on_disk) = (
        queue.wal_size().expect("wal_size"),
        std::fs::metadata(format!("{db}-wal")).map_or(0, |m| m.len()),
    );
    drop(queue);

    verify_run(
        &Target::File(db.clone()),
        &history_dir,
        &Expect::default(),
        "wal",
    );
    println!(
        "[wal] under 4 monitoring readers: {monitored} (bound {} MiB); under a held snapshot: {pinned}; \
         once it ended: {released} in the last of {rounds} rounds, {} MiB at the end; after a \
         checkpoint: {} bytes (complete: {})",
        MONITORED_BOUND / MIB,
        end / MIB,
        checkpoint.wal_bytes,
        checkpoint.complete
    );
    assert!(
        pinned.peak > JOURNAL_SIZE_LIMIT,
        "the held snapshot did not let the WAL grow past 64 MiB: the shrink-back was not tested"
    );
    assert!(
        end <= JOURNAL_SIZE_LIMIT,
        "the WAL stayed at {} MiB after the snapshot ended",
        end / MIB
    );
    assert!(
        checkpoint.complete && checkpoint.wal_bytes == 0,
        "a checkpoint with no reader left the WAL at {} bytes (complete: {})",
        checkpoint.wal_bytes,
        checkpoint.complete
    );
    assert_eq!(
        (reported, on_disk),
        (0, 0),
        "wal_size and the file after the checkpoint"
    );
    assert!(
        monitored.peak <= MONITORED_BOUND,
        "under monitoring readers the WAL reached {} MiB, past the {} MiB that tq's upkeep allows \
         (16 MiB, then a checkpoint tried every 32 commits of each writing process): the log \
         restarted {} times while {} MiB were pushed",
        monitored.peak / MIB,
        MONITORED_BOUND / MIB,
        monitored.restarts,
        monitored.pushed_mib
    );
}
