//! Scenario 8, PostgreSQL only: the failures of a networked database.
//! Producers and workers (child processes, and a producer thread of the
//! test process) run throughout while the driver restarts the server
//! (`pg_ctl restart`, fast or immediate, the latter a crash the server
//! recovers from), ends tq's sessions from a side connection
//! (`pg_terminate_backend`), and drives a TCP proxy between tq and the
//! server (proxy.rs) to cut connections, all or a few, and to stall them,
//! a stall sometimes ending in a cut. Another handle of the test process
//! calls `recover` throughout.
//!
//! Every process keeps the handles it opened before the faults: once the
//! faults stop, each must work again with them. Then the queue is drained
//! and the checker reads the histories, allowing a call to fail only with
//! `Io` (nothing was committed) or `UnknownOutcome` (it may have been):
//! no acknowledged push lost, none stored twice, no task finished twice,
//! and no delivery handed out while another live worker's lease ran, which
//! is what a `recover` taking a live worker's task would show. Leases are
//! long (8 to 12 s) against work of a few milliseconds, so such a
//! redelivery would fall inside the first lease. One more worker process
//! works longer than its short leases and extends them as it goes, so
//! extends meet the faults too.
//!
//! Needs the test server's URL and its cluster directory
//! (`TQ_TEST_POSTGRES_URL`, `TQ_TEST_POSTGRES_DIR`: `make test-postgres`
//! sets both) to restart it with `tests/postgres/cluster.sh restart`. In CI
//! the faults go on until at least [`CI_RESTARTS`] restarts and
//! [`CI_CUTS`] connections cut by the proxy; the long mode
//! (`TQ_TORTURE_SECONDS`) goes on for that long.
//!
//! The first test needs no server: a fake one, answering every connection
//! that it is starting up, shows that tq reports that as out of reach
//! (`Io`), like the real server's restarts above.

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::Path;
use std::process::Command;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tq::{Durability, OpenOptions, Queue};

use super::checker::{verify_run, Expect};
use super::client::{self, Client};
use super::common::postgres_client;
use super::db::Target;
use super::harness::{now_ns, sleep_ms, spawn, wait_until, Dir, Proc, Rng, Settings};
use super::history::{Histories, History, Operation};
use super::proxy::Proxy;

/// Server restarts per CI run, at least.
const CI_RESTARTS: usize = 20;

/// Connections cut by the proxy per CI run, at least.
const CI_CUTS: usize = 200;

/// The longest the CI fault phase may take to reach both counts.
const CI_PHASE_CAP: Duration = Duration::from_secs(100);

/// After the faults, how long the processes go on with the same handles.
const SETTLE: Duration = Duration::from_secs(6);

/// Worker and producer processes, and their threads.
const WORKERS: usize = 3;
const PRODUCERS: usize = 2;
const THREADS: &str = "2";

/// Attempts per task: enough that a task whose deliveries are cut again
/// and again does not end dead.
const MAX_ATTEMPTS: &str = "50";

#[test]
#[ignore = "torture test on PostgreSQL: make test-postgres"]
fn server_restarts_and_cut_connections_lose_nothing_on_postgres() {
    const TEST: &str = "server_restarts_and_cut_connections_lose_nothing_on_postgres";
    let Some(target) = Target::postgres(TEST, "torture_network") else {
        return;
    };
    let Some(cluster) = cluster_dir(TEST) else {
        return;
    };
    network_faults(&Dir::new(), &target, &cluster, "network-postgres");
}

/// While PostgreSQL starts up, shuts down or recovers from a crash, it
/// answers a new connection with FATAL 57P03 ("the database system is
/// starting up"): a server out of reach for a moment, to be tried again,
/// not a refusal of the URL. A fake server that answers only that stands
/// for it here.
#[test]
fn a_server_starting_up_or_shutting_down_is_out_of_reach_not_a_bad_url() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("an address").port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let _ = answer_starting_up(&mut stream);
        }
    });
    let url = format!("postgres://tq@127.0.0.1:{port}/tq");
    let Err(err) = Queue::open(&url, &OpenOptions::new()) else {
        panic!("opened a queue on a server that is starting up");
    };
    assert_eq!(err.kind(), tq::ErrorKind::Io, "{err}");
    assert!(err.message().contains("starting up"), "{err}");
}

/// Reads a client's startup message (after refusing TLS, if it asks) and
/// answers that the server is starting up.
fn answer_starting_up(stream: &mut std::net::TcpStream) -> std::io::Result<()> {
    use std::io::{Read, Write};
    const SSL_REQUEST: u32 = 80_877_103;
    loop {
        let mut header = [0u8; 8];
        stream.read_exact(&mut header)?;
        let length = u32::from_be_bytes(header[..4].try_into().unwrap()) as usize;
        let code = u32::from_be_bytes(header[4..].try_into().unwrap());
        if code == SSL_REQUEST {
            stream.write_all(b"N")?;
            continue;
        }
        let mut rest = vec![0u8; length.saturating_sub(8)];
        stream.read_exact(&mut rest)?;
        break;
    }
    let mut fields = Vec::new();
    for (tag, value) in [
        (b'S', "FATAL"),
        (b'V', "FATAL"),
        (b'C', "57P03"),
        (b'M', "the database system is starting up"),
    ] {
        fields.push(tag);
        fields.extend_from_slice(value.as_bytes());
        fields.push(0);
    }
    fields.push(0);
    let mut message = vec![b'E'];
    message.extend_from_slice(&(fields.len() as u32 + 4).to_be_bytes());
    message.extend_from_slice(&fields);
    stream.write_all(&message)
}

/// The test server's cluster directory, or `None` after saying why the
/// test is skipped.
fn cluster_dir(test: &str) -> Option<String> {
    match std::env::var("TQ_TEST_POSTGRES_DIR") {
        Ok(dir) if !dir.is_empty() => Some(dir),
        _ => {
            eprintln!(
                "skipped {test}: TQ_TEST_POSTGRES_DIR is not set (`make test-postgres` sets it to \
                 the directory of the server it starts with tests/postgres/cluster.sh)"
            );
            None
        }
    }
}

/// What the driver did.
#[derive(Default)]
struct Faults {
    restarts: usize,
    restart_time: Duration,
    slowest_restart: Duration,
    /// Connections cut by the proxy.
    cuts: usize,
    stalls: usize,
    /// Sessions ended with `pg_terminate_backend`.
    terminated: usize,
}

fn network_faults(dir: &Dir, target: &Target, cluster: &str, scenario: &str) {
    let settings = Settings::new(scenario);
    let mut rng = settings.rng();
    let history_dir = dir.sub("history");
    let driver = History::create(&history_dir, "driver");
    let Target::Postgres { url, schema } = target else {
        unreachable!("a PostgreSQL scenario")
    };
    let proxy = Proxy::start(server_addr(url));
    let through_proxy = proxied_url(url, proxy.addr);
    // The schema, made before anyone connects through the proxy.
    drop(Queue::open(url, &target.options(&OpenOptions::new())).expect("open"));

    // Children stop by themselves SETTLE after the faults end; until the
    // driver knows when that is, it gives them its longest phase.
    let phase_cap = settings.duration(CI_PHASE_CAP);
    let child_deadline =
        now_ns() + (phase_cap + SETTLE + Duration::from_secs(30)).as_nanos() as i64;
    let args = |label: &str, rng: &mut Rng| {
        let mut args = super::harness::child_args(
            &through_proxy,
            &history_dir,
            label,
            rng.next(),
            child_deadline,
        );
        args.extend([
            ("schema", schema.clone()),
            ("threads", THREADS.into()),
            ("max_attempts", MAX_ATTEMPTS.into()),
        ]);
        args
    };
    let stop_file = history_dir.join("stop");
    let stop_arg = (
        "stop_file",
        stop_file.to_str().expect("UTF-8 path").to_owned(),
    );
    let threads: usize = THREADS.parse().unwrap();
    // Each child, and how many handles it opens: one per thread, or one
    // shared by its threads.
    let mut children: Vec<(Proc, String, usize)> = Vec::new();
    for n in 0..PRODUCERS {
        let label = format!("producer{n}");
        let mut args = args(&label, &mut rng);
        args.extend([
            ("pad", "20".into()),
            ("pause", "15".into()),
            stop_arg.clone(),
        ]);
        children.push((spawn("producer", &args), label, threads));
    }
    for n in 0..WORKERS {
        let label = format!("worker{n}");
        let shared = rng.chance(0.5);
        let mut args = args(&label, &mut rng);
        args.extend([
            ("shared", u8::from(shared).to_string()),
            ("lease_min", "8000".into()),
            ("lease_max", "12000".into()),
            ("work_min", "0".into()),
            ("work_max", "5".into()),
            ("fail", "5".into()),
            ("finish_pull", "30".into()),
            ("backoff", "5:50".into()),
            stop_arg.clone(),
        ]);
        let handles = if shared { 1 } else { threads };
        children.push((spawn("worker", &args), label, handles));
    }
    let label = "extender".to_owned();
    let mut args = args(&label, &mut rng);
    args.extend([
        ("lease_min", "600".into()),
        ("lease_max", "1000".into()),
        ("work_min", "300".into()),
        ("work_max", "1500".into()),
        ("heartbeat", "100".into()),
        stop_arg.clone(),
    ]);
    children.push((spawn("worker", &args), label, threads));
    // The faults start once every child has opened its handles.
    for (_, label, handles) in &children {
        assert!(
            wait_until(Duration::from_secs(60), || {
                Histories::read_process(&history_dir, label)
                    .ops
                    .iter()
                    .filter(|op| op.op == "open" && op.is_ok())
                    .count()
                    == *handles
            }),
            "{label} did not open its {handles} handles"
        );
    }

    let stop = AtomicBool::new(false);
    let mut faults = Faults::default();
    let faults_ended = std::thread::scope(|scope| {
        // A producer and a recoverer in this process, each with a handle of
        // its own through the proxy, opened before the faults.
        // An immediate restart is a crash of the server: only commits made
        // at full durability (synchronous_commit on) must survive it, as
        // the children's do (their default).
        let mut options = target.options(&OpenOptions::new());
        options
            .durability(Durability::Full)
            .max_attempts(MAX_ATTEMPTS.parse().unwrap())
            .unwrap();
        for (label, produces) in [("parent-producer", true), ("parent-recoverer", false)] {
            let history = History::create(&history_dir, label);
            let queue = client::open(&history, 0, &through_proxy, &options).expect("open");
            let stop = &stop;
            scope.spawn(move || {
                let client = Client {
                    queue: &queue,
                    history: &history,
                    thread: 0,
                };
                let mut n = 0;
                while !stop.load(Ordering::SeqCst) {
                    if produces {
                        let _ = client.push(&format!("{label}-{n}"), 0);
                        n += 1;
                        sleep_ms(15);
                    } else {
                        let _ = client.recover();
                        sleep_ms(50);
                    }
                }
            });
        }

        // Stops the threads above once the driver is done, or panics.
        let _stop_threads = StopOnDrop(&stop);
        let begin = Instant::now();
        let enough = |faults: &Faults| {
            if settings.is_long() {
                begin.elapsed() >= phase_cap
            } else {
                (faults.restarts >= CI_RESTARTS && faults.cuts >= CI_CUTS)
                    || begin.elapsed() >= phase_cap
            }
        };
        while !enough(&faults) {
            inject(&mut rng, &proxy, url, cluster, &driver, &mut faults);
            sleep_ms(rng.range(100, 500));
        }
        proxy.stall(false);
        let ended = now_ns();
        driver.info("faults_end", "");
        sleep_ms(SETTLE.as_millis() as u64);
        std::fs::write(&stop_file, "").expect("write the stop file");
        ended
    });
    for (proc, label, _) in &mut children {
        assert_eq!(
            proc.wait_timeout(Duration::from_secs(60)),
            Ok(Some(0)),
            "{label} did not end cleanly"
        );
    }
    drop(proxy);
    println!(
        "[{scenario}] {} server restarts (mean {} ms, slowest {} ms), {} connections cut by the \
         proxy, {} stalls, {} sessions terminated",
        faults.restarts,
        faults.restart_time.as_millis() / faults.restarts.max(1) as u128,
        faults.slowest_restart.as_millis(),
        faults.cuts,
        faults.stalls,
        faults.terminated
    );
    if !settings.is_long() {
        assert!(
            faults.restarts >= CI_RESTARTS && faults.cuts >= CI_CUTS,
            "the fault phase ended at its cap of {} s before {CI_RESTARTS} restarts and \
             {CI_CUTS} cuts",
            phase_cap.as_secs()
        );
    }

    let histories = Histories::read(&history_dir);
    assert_works_again(&histories, faults_ended);
    drain(target, &history_dir);
    let expect = Expect {
        drained: true,
        network_faults: true,
        ..Expect::default()
    };
    let (_, report) = verify_run(target, &history_dir, &expect, scenario);
    assert!(
        report.stats.pushed > 0 && report.stats.finished > 0,
        "{report}"
    );
    assert!(
        report.stats.io_failures + report.stats.unknown_outcomes > 0,
        "no call noticed a fault: {report}"
    );
    assert!(report.queues.values().all(|b| b.holds()), "{report}");
}

/// Sets its flag when dropped, even by a panic.
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// One fault, chosen at random.
fn inject(
    rng: &mut Rng,
    proxy: &Proxy,
    url: &str,
    cluster: &str,
    driver: &History,
    faults: &mut Faults,
) {
    match rng.range(0, 9) {
        0..=3 => {
            let mode = if rng.chance(0.25) {
                "immediate"
            } else {
                "fast"
            };
            driver.info("restart", &format!("mode={mode}"));
            let took = restart(cluster, mode);
            faults.restarts += 1;
            faults.restart_time += took;
            faults.slowest_restart = faults.slowest_restart.max(took);
        }
        4 => {
            let ended = terminate_sessions(url, rng.chance(0.5));
            driver.info("terminate", &format!("sessions={ended}"));
            faults.terminated += ended;
        }
        5 | 6 => {
            let cut = proxy.cut_all();
            driver.info("cut", &format!("connections={cut}"));
            faults.cuts += cut;
        }
        7 => {
            let count = rng.range(1, 4) as usize;
            let cut = proxy.cut_some(rng, count);
            driver.info("cut", &format!("connections={cut}"));
            faults.cuts += cut;
        }
        _ => {
            let ms = rng.range(200, 2000);
            driver.info("stall", &format!("ms={ms}"));
            proxy.stall(true);
            sleep_ms(ms);
            if rng.chance(0.5) {
                let cut = proxy.cut_all();
                driver.info("cut", &format!("connections={cut}"));
                faults.cuts += cut;
            }
            proxy.stall(false);
            faults.stalls += 1;
        }
    }
}

/// Restarts the server in `mode`; returns how long it took.
fn restart(cluster: &str, mode: &str) -> Duration {
    let started = Instant::now();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/postgres/cluster.sh");
    let status = Command::new(script)
        .args(["restart", cluster, mode])
        .status()
        .expect("run cluster.sh");
    assert!(status.success(), "cluster.sh restart {cluster} {mode}");
    started.elapsed()
}

/// Ends tq's sessions on the server (all, or about half), from a session
/// of the test's own; returns how many.
fn terminate_sessions(url: &str, all: bool) -> usize {
    let share = if all { 1.0 } else { 0.5 };
    let ended: i64 = postgres_client(url)
        .query_one(
            "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity
             WHERE application_name = 'tq' AND pid <> pg_backend_pid() AND random() < $1",
            &[&share],
        )
        .expect("terminate tq's sessions")
        .get(0);
    ended as usize
}

/// Every process had an answer from the server (a success, or a refusal
/// as not held) to a call of each kind it makes, begun after the faults
/// ended, with the handles it opened before them.
fn assert_works_again(histories: &Histories, faults_ended: i64) {
    let mut processes: Vec<&str> = histories.ops.iter().map(|op| op.process.as_str()).collect();
    processes.sort();
    processes.dedup();
    for process in processes {
        let ops: Vec<&Operation> = histories
            .ops
            .iter()
            .filter(|op| op.process == process)
            .collect();
        let opens_after = ops
            .iter()
            .filter(|op| op.op == "open" && op.invoked > faults_ended)
            .count();
        assert_eq!(opens_after, 0, "{process} opened a handle again");
        let mut kinds: Vec<&str> = ops
            .iter()
            .map(|op| op.op.as_str())
            .filter(|op| matches!(*op, "push" | "pull" | "finish" | "extend" | "recover"))
            .collect();
        kinds.sort();
        kinds.dedup();
        for kind in kinds {
            let worked = ops.iter().any(|op| {
                op.op == kind
                    && op.invoked > faults_ended
                    && (op.is_ok() || op.failed_with("NotHeld"))
            });
            assert!(
                worked,
                "{process}: no {kind} was answered in the {} s after the faults ended",
                SETTLE.as_secs()
            );
        }
    }
}

/// Empties the queue through a direct handle: recovers, then pulls and
/// finishes until nothing is pending or held. Tasks still held by the
/// workers' processes (a claim whose answer was lost) come back when their
/// lease expires or their holder's grace period ends.
fn drain(target: &Target, history_dir: &Path) {
    let history = History::create(history_dir, "drain");
    let queue = client::open(
        &history,
        0,
        target.db(),
        &target.options(&OpenOptions::new()),
    )
    .expect("open");
    let client = Client {
        queue: &queue,
        history: &history,
        thread: 0,
    };
    let drained = wait_until(Duration::from_secs(90), || {
        client.recover().expect("recover");
        while let Some(task) = client.pull(60_000).expect("pull") {
            client.finish(&task).expect("finish");
        }
        let empty = queue.count(tq::TaskState::Pending).expect("count") == 0
            && queue.count(tq::TaskState::Leased).expect("count") == 0;
        if !empty {
            sleep_ms(50);
        }
        empty
    });
    assert!(drained, "the queue was not drained within 90 s");
}

/// The server's address in `url`.
fn server_addr(url: &str) -> SocketAddr {
    let config = postgres::Config::from_str(url).expect("the test server's URL");
    let host = match &config.get_hosts()[0] {
        postgres::config::Host::Tcp(name) => name.clone(),
        postgres::config::Host::Unix(_) => panic!("the test server listens on TCP"),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    (host.as_str(), port)
        .to_socket_addrs()
        .expect("resolve the test server")
        .next()
        .expect("an address")
}

/// `url` with its host and port replaced by the proxy's.
fn proxied_url(url: &str, proxy: SocketAddr) -> String {
    let addr = server_addr(url);
    let place = format!("{}:{}", addr.ip(), addr.port());
    assert!(url.contains(&place), "{url} names its server as {place}");
    url.replacen(&place, &proxy.to_string(), 1)
}
