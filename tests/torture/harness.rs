//! What every scenario shares: the settings read from the environment
//! (seed, long mode), a seeded random generator, child processes (this test
//! binary run again in a role), signals, and waiting.
//!
//! Environment of a run:
//! - `TQ_TORTURE_SEED=N` replays a run: every random choice a scenario makes
//!   (kill delays, leases, the sync where power fails, which writes survive)
//!   comes from it. The operating system's scheduling is not replayed, so a
//!   replay repeats the choices, not always the exact interleaving.
//! - `TQ_TORTURE_SECONDS=N` is the long mode: each scenario runs its rounds
//!   (or its chaos phase) for N seconds instead of its short CI budget.
//! - `TQ_TORTURE_KEEP=1` keeps each scenario's directory (database and
//!   histories) instead of removing it.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tq::{Queue, TaskState};

use super::db::Target;
use super::history::History;

/// A scenario's settings: its seed and its time budget.
pub struct Settings {
    pub seed: u64,
    long: Option<Duration>,
}

impl Settings {
    /// Reads the environment and prints the seed, so a failure can be
    /// replayed. Each scenario mixes its name into the seed, so replaying
    /// one scenario does not depend on the others having run.
    pub fn new(scenario: &str) -> Settings {
        let base = match std::env::var("TQ_TORTURE_SEED") {
            Ok(text) => text
                .trim()
                .parse()
                .expect("TQ_TORTURE_SEED must be an integer"),
            Err(_) => now_ns() as u64 % 1_000_000_000,
        };
        let long = long_budget();
        println!(
            "[{scenario}] seed {base} (replay: TQ_TORTURE_SEED={base}){}",
            long.map_or(String::new(), |d| format!(", long mode {} s", d.as_secs()))
        );
        let mut mix = Rng::new(base);
        for byte in scenario.bytes() {
            mix = Rng::new(mix.next() ^ u64::from(byte));
        }
        Settings {
            seed: mix.next(),
            long,
        }
    }

    /// How long a timed phase runs: `ci` in CI, the long budget otherwise.
    pub fn duration(&self, ci: Duration) -> Duration {
        self.long.unwrap_or(ci)
    }

    /// Whether this is the long mode.
    pub fn is_long(&self) -> bool {
        self.long.is_some()
    }

    /// Rounds: `ci` of them in CI; in long mode, as many as fit in the
    /// budget (at least one).
    pub fn rounds(&self, ci: usize) -> Rounds {
        Rounds {
            done: 0,
            ci,
            deadline: self.long.map(|d| Instant::now() + d),
        }
    }

    pub fn rng(&self) -> Rng {
        Rng::new(self.seed)
    }
}

/// The long mode's budget per scenario, if set.
fn long_budget() -> Option<Duration> {
    std::env::var("TQ_TORTURE_SECONDS").ok().map(|text| {
        Duration::from_secs(
            text.trim()
                .parse()
                .expect("TQ_TORTURE_SECONDS must be an integer"),
        )
    })
}

/// Rounds of a scenario that makes no random choice: one in CI, as many
/// as fit in the long budget otherwise.
pub fn repeat(scenario: &str) -> Rounds {
    let long = long_budget();
    if let Some(budget) = long {
        println!("[{scenario}] long mode {} s", budget.as_secs());
    }
    Rounds {
        done: 0,
        ci: 1,
        deadline: long.map(|d| Instant::now() + d),
    }
}

pub struct Rounds {
    done: usize,
    ci: usize,
    deadline: Option<Instant>,
}

impl Iterator for Rounds {
    type Item = usize;
    fn next(&mut self) -> Option<usize> {
        let more = match self.deadline {
            Some(deadline) => self.done == 0 || Instant::now() < deadline,
            None => self.done < self.ci,
        };
        more.then(|| {
            self.done += 1;
            self.done - 1
        })
    }
}

/// SplitMix64: small, seedable, good enough to choose test actions.
#[derive(Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }
}

/// Nanoseconds since the Unix epoch from the kernel itself: the raw system
/// call bypasses libfaketime, so every history shares one real clock even
/// when a process's own view of time is shifted.
pub fn now_ns() -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_clock_gettime,
            libc::CLOCK_REALTIME,
            &mut ts as *mut libc::timespec,
        )
    };
    assert_eq!(rc, 0, "clock_gettime");
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

pub fn sleep_ms(ms: u64) {
    std::thread::sleep(Duration::from_millis(ms));
}

/// A scenario's directory: the queue file, one history file per process.
pub struct Dir {
    dir: tempfile::TempDir,
}

impl Dir {
    /// A new temporary directory, removed at the end of the test unless
    /// `TQ_TORTURE_KEEP=1` asks to keep it (its path is printed) for a
    /// look at the histories and the database after a failure.
    pub fn new() -> Dir {
        let mut dir = tempfile::tempdir().expect("a temporary directory");
        if std::env::var("TQ_TORTURE_KEEP").is_ok_and(|v| v == "1") {
            dir.disable_cleanup(true);
            println!("keeping {}", dir.path().display());
        }
        Dir { dir }
    }

    pub fn file(&self, name: &str) -> String {
        self.dir
            .path()
            .join(name)
            .to_str()
            .expect("UTF-8 path")
            .to_owned()
    }

    /// A subdirectory, created empty (one per round).
    pub fn sub(&self, name: &str) -> PathBuf {
        let path = self.dir.path().join(name);
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).expect("create a round directory");
        path
    }
}

/// Arguments a child reads with [`arg`]: passed as `TQ_TORTURE_ARG_<name>`.
pub type Args = Vec<(&'static str, String)>;

/// The arguments every child takes: the queue file, the history
/// directory, its unique label, its seed, and the deadline (Unix ns) at
/// which it stops by itself.
pub fn child_args(db: &str, history_dir: &Path, label: &str, seed: u64, deadline: i64) -> Args {
    vec![
        ("db", db.to_owned()),
        ("dir", history_dir.to_str().expect("UTF-8 path").to_owned()),
        ("label", label.to_owned()),
        ("seed", seed.to_string()),
        ("deadline", deadline.to_string()),
    ]
}

/// This test binary, run again to play `role` (see `child_process` in
/// main.rs). Its standard output is the test harness's chatter, discarded;
/// its standard error shows in the test's output.
pub fn spawn(role: &str, args: &Args) -> Proc {
    Proc::start(child_command(role, args))
}

/// The same, under libfaketime with the process's wall clock shifted by
/// `offset` (for example "+5s"); the reason when libfaketime is not
/// installed.
pub fn spawn_with_clock(role: &str, args: &Args, offset: &str) -> Result<Proc, String> {
    let mut command = child_command(role, args);
    command
        .env("LD_PRELOAD", faketime_library()?)
        .env("FAKETIME", offset)
        // Only the wall clock moves: tq's busy back-off and the test's
        // sleeps keep real time.
        .env("FAKETIME_DONT_FAKE_MONOTONIC", "1")
        .env("FAKETIME_NO_CACHE", "1");
    Ok(Proc::start(command))
}

fn child_command(role: &str, args: &Args) -> Command {
    let mut command = super::common::child_command(role);
    command.stdin(Stdio::null()).stdout(Stdio::null());
    for (name, value) in args {
        command.env(format!("TQ_TORTURE_ARG_{name}"), value);
    }
    command
}

fn faketime_library() -> Result<&'static str, String> {
    const CANDIDATES: [&str; 2] = [
        "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
        "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
    ];
    CANDIDATES
        .into_iter()
        .find(|path| Path::new(path).exists())
        .ok_or_else(|| {
            "libfaketime is not installed (Debian package: faketime, `apt-get install -y faketime`)"
                .to_owned()
        })
}

/// The value of argument `name` in a child.
pub fn arg<T: std::str::FromStr>(name: &str) -> T {
    let text = std::env::var(format!("TQ_TORTURE_ARG_{name}"))
        .unwrap_or_else(|_| panic!("the child needs argument {name}"));
    text.parse()
        .unwrap_or_else(|_| panic!("argument {name} has a bad value: {text}"))
}

/// The value of argument `name`, if given.
pub fn arg_opt<T: std::str::FromStr>(name: &str) -> Option<T> {
    std::env::var(format!("TQ_TORTURE_ARG_{name}"))
        .ok()
        .map(|text| {
            text.parse()
                .unwrap_or_else(|_| panic!("argument {name}: {text}"))
        })
}

/// A child process, killed (and reaped) when dropped so that a failing
/// test leaves nothing running.
pub struct Proc {
    child: Option<Child>,
    pub pid: i32,
}

impl Proc {
    fn start(mut command: Command) -> Proc {
        let child = command.spawn().expect("spawn a child process");
        Proc {
            pid: child.id() as i32,
            child: Some(child),
        }
    }

    pub fn signal(&self, signal: libc::c_int) {
        // SAFETY: plain kill(2) on our own child, which is not yet reaped.
        unsafe { libc::kill(self.pid, signal) };
    }

    /// SIGKILL, then reap.
    pub fn kill(&mut self) {
        self.signal(libc::SIGKILL);
        self.wait();
    }

    /// Waits for the exit and returns its code (`None` when killed by a
    /// signal).
    pub fn wait(&mut self) -> Option<i32> {
        let status = self
            .child
            .as_mut()
            .expect("not yet reaped")
            .wait()
            .expect("wait");
        self.child = None;
        status.code()
    }

    /// The exit code if it has exited (`Some(None)`: killed by a signal).
    pub fn try_wait(&mut self) -> Option<Option<i32>> {
        let status = self.child.as_mut()?.try_wait().expect("try_wait")?;
        self.child = None;
        Some(status.code())
    }

    /// Waits up to `timeout` for the exit; kills it past that.
    pub fn wait_timeout(&mut self, timeout: Duration) -> Result<Option<i32>, String> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(code) = self.try_wait() {
                return Ok(code);
            }
            if Instant::now() >= deadline {
                self.kill();
                return Err(format!(
                    "child {} did not exit within {timeout:?}",
                    self.pid
                ));
            }
            sleep_ms(5);
        }
    }

    /// Waits until the process is stopped (SIGSTOP), up to `timeout`.
    pub fn wait_stopped(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            let stat =
                std::fs::read_to_string(format!("/proc/{}/stat", self.pid)).unwrap_or_default();
            // The state follows the command name, which is in parentheses.
            if stat
                .rsplit_once(") ")
                .is_some_and(|(_, rest)| rest.starts_with('T'))
            {
                return true;
            }
            sleep_ms(2);
        }
        false
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if self.child.is_some() {
            self.signal(libc::SIGCONT);
            self.kill();
        }
    }
}

/// Waits until `condition` holds, checking every few milliseconds, up to
/// `timeout`; returns whether it held.
pub fn wait_until(timeout: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if condition() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        sleep_ms(3);
    }
}

/// Three workers at a time, each killed at random within 50 to 600 ms and
/// replaced (they fail and retry some tasks, finish-and-pull some, and
/// recover at start or not; `overrides` replace or add to their settings,
/// see roles.rs), for `phase` or until at most 20 tasks of `queue` are
/// pending; then drain workers, one after another, until the queue holds
/// nothing pending or leased, or two rounds in a row changed nothing (the
/// scenario's checks then name what was left). The drain workers do not
/// recover: pulls alone must take back what killed workers held, and end
/// what was cancelled in their hands, once the leases ran out. Every
/// worker stops by itself 180 s after the phase, should the driver fail
/// to.
pub fn work_killed_then_drain(
    queue: &Queue,
    target: &Target,
    history_dir: &Path,
    driver: &History,
    rng: &mut Rng,
    phase: Duration,
    overrides: &Args,
) -> Turnover {
    let deadline = now_ns() + phase.as_nanos() as i64 + 180_000_000_000;
    let mut slots: Vec<Option<(Proc, String, Instant)>> = (0..3).map(|_| None).collect();
    let (mut started, mut killed) = (0, 0);
    let begin = Instant::now();
    while begin.elapsed() < phase && queue.count(TaskState::Pending).unwrap() > 20 {
        for slot in &mut slots {
            if let Some((proc, label, kill_at)) = slot {
                if Instant::now() >= *kill_at {
                    driver.info("kill", &format!("target={label}"));
                    proc.kill();
                    killed += 1;
                    *slot = None;
                }
            }
            if slot.is_none() {
                let label = format!("w{started}");
                started += 1;
                let mut args = target.child_args(history_dir, &label, rng.next(), deadline);
                args.extend([
                    ("threads", "2".into()),
                    ("shared", rng.range(0, 1).to_string()),
                    ("lease_min", "50".into()),
                    ("lease_max", "300".into()),
                    ("work_min", "0".into()),
                    ("work_max", "10".into()),
                    ("recover", rng.range(0, 1).to_string()),
                    ("fail", "10".into()),
                    ("finish_pull", "30".into()),
                    ("backoff", "1:20".into()),
                ]);
                args.retain(|(name, _)| overrides.iter().all(|(other, _)| other != name));
                args.extend(overrides.iter().cloned());
                let life = Duration::from_millis(rng.range(50, 600));
                *slot = Some((spawn("worker", &args), label, Instant::now() + life));
            }
        }
        sleep_ms(2);
    }
    for (proc, label, _) in slots.iter_mut().flatten() {
        driver.info("kill", &format!("target={label}"));
        proc.kill();
        killed += 1;
    }

    // Drain: workers that pull until idle, one after another.
    let left =
        || queue.count(TaskState::Pending).unwrap() + queue.count(TaskState::Leased).unwrap();
    let (mut round, mut idle_rounds) = (0, 0);
    loop {
        let before = left();
        if before == 0 || idle_rounds == 2 || round == 20 {
            break;
        }
        let mut args =
            target.child_args(history_dir, &format!("drain{round}"), rng.next(), deadline);
        args.extend([
            ("threads", "2".into()),
            ("lease_min", "200".into()),
            ("lease_max", "400".into()),
            ("work_min", "0".into()),
            ("work_max", "1".into()),
            ("idle_exit", "500".into()),
            ("finish_pull", "80".into()),
        ]);
        spawn("worker", &args)
            .wait_timeout(Duration::from_secs(180))
            .expect("drain");
        round += 1;
        idle_rounds = if left() == before { idle_rounds + 1 } else { 0 };
    }
    let left = left();
    if left > 0 {
        driver.info("undrained", &format!("left={left}"));
        println!("the drain stopped with {left} tasks pending or leased");
    }
    Turnover {
        started,
        killed,
        drain_rounds: round,
    }
}

/// What [`work_killed_then_drain`] did.
pub struct Turnover {
    /// Worker processes started before the drain.
    pub started: usize,
    /// How many of them the driver killed.
    pub killed: usize,
    /// Drain workers run one after another until the queue was empty.
    pub drain_rounds: usize,
}

/// Processes of one role that [`kill_and_replace`] keeps running.
pub struct Crew<'a> {
    pub role: &'a str,
    /// Labels are PREFIX0, PREFIX1...
    pub prefix: &'a str,
    /// How many run at once.
    pub count: usize,
    /// Each is killed at a random moment this many ms after its start.
    pub life_ms: (u64, u64),
}

/// Keeps `crew` running until `done` says so, each process killed at a
/// random moment of its life (the driver's `kill` event first, `reaped`
/// once it is gone) and replaced by a new one; `args(label, seed)` gives each its arguments.
/// Kills those left at the end. Returns how many were started and killed.
pub fn kill_and_replace(
    crew: &Crew,
    driver: &History,
    rng: &mut Rng,
    args: impl Fn(&str, u64) -> Args,
    mut done: impl FnMut() -> bool,
) -> (usize, usize) {
    let mut slots: Vec<Option<(Proc, String, Instant)>> = (0..crew.count).map(|_| None).collect();
    let (mut started, mut killed) = (0, 0);
    while !done() {
        for slot in &mut slots {
            if let Some((proc, label, kill_at)) = slot {
                if Instant::now() >= *kill_at {
                    driver.info("kill", &format!("target={label}"));
                    proc.kill();
                    driver.info("reaped", &format!("target={label}"));
                    killed += 1;
                    *slot = None;
                }
            }
            if slot.is_none() {
                let label = format!("{}{started}", crew.prefix);
                started += 1;
                let life = Duration::from_millis(rng.range(crew.life_ms.0, crew.life_ms.1));
                let proc = spawn(crew.role, &args(&label, rng.next()));
                *slot = Some((proc, label, Instant::now() + life));
            }
        }
        sleep_ms(2);
    }
    for (proc, label, _) in slots.iter_mut().flatten() {
        driver.info("kill", &format!("target={label}"));
        proc.kill();
        driver.info("reaped", &format!("target={label}"));
        killed += 1;
    }
    (started, killed)
}
