//! Scenario 6: many openers. Sixteen processes wait for one instant, then
//! open a brand-new file and push a task each; many rounds. Then the same
//! on a file whose last user was killed in the middle of writing (by the
//! crash VFS at a random write or sync, or by SIGKILL at a random moment).
//! Every open and push succeeds; the file ends with tq's schema exactly
//! once (the same objects and version as a file one process created), in
//! WAL mode, passing `integrity_check`; the checker finds nothing lost.

use std::path::Path;
use std::time::Duration;

use tq::{OpenOptions, Queue};

use super::checker::{verify_run, Expect};
use super::db::{self, Target};
use super::harness::{child_args, now_ns, spawn, Dir, Rng, Settings};
use super::history::{Histories, History};

const OPENERS: usize = 16;

/// The journal mode, objects and schema version of a file that one
/// process created alone.
fn reference_layout(dir: &Dir) -> (String, Vec<String>, Vec<i64>) {
    let path = dir.file("reference.db");
    drop(Queue::open(&path, &OpenOptions::new()).expect("open"));
    db::layout(&path)
}

/// Starts the openers together on `db` and waits for them; returns how
/// far apart their opens began, in ms.
fn open_at_once(db: &str, history_dir: &Path, rng: &mut Rng) -> i64 {
    // Far enough ahead that every process has started (spawning sixteen
    // takes a few hundred ms on two cores).
    let start_at = now_ns() + 800_000_000;
    let deadline = now_ns() + 60_000_000_000;
    let mut openers: Vec<_> = (0..OPENERS)
        .map(|i| {
            let label = format!("o{i}");
            let mut args = child_args(db, history_dir, &label, rng.next(), deadline);
            args.extend([("start_at", start_at.to_string()), ("key", label)]);
            spawn("opener", &args)
        })
        .collect();
    for opener in &mut openers {
        assert_eq!(
            opener.wait_timeout(Duration::from_secs(60)).unwrap(),
            Some(0),
            "an opener failed"
        );
    }
    let histories = Histories::read(history_dir);
    let opens: Vec<i64> = histories
        .ops
        .iter()
        .filter(|op| op.op == "open" && op.process.starts_with('o'))
        .map(|op| op.invoked)
        .collect();
    assert_eq!(opens.len(), OPENERS, "every opener logged its open");
    (opens.iter().max().unwrap() - opens.iter().min().unwrap()) / 1_000_000
}

fn check_round(
    db: &str,
    history_dir: &Path,
    reference: &(String, Vec<String>, Vec<i64>),
    context: &str,
) {
    let (_, report) = verify_run(
        &Target::File(db.to_owned()),
        history_dir,
        &Expect::default(),
        context,
    );
    let layout = db::layout(db);
    assert_eq!(
        &layout, reference,
        "{context}: journal mode, schema objects, schema version"
    );
    // Each opener's task is there (the checker proved it) and nothing failed.
    assert!(
        report.stats.pushed >= OPENERS,
        "{context}: {} pushes acknowledged",
        report.stats.pushed
    );
}

#[test]
#[ignore = "torture test: make test-torture"]
fn sixteen_processes_opening_a_new_file_at_once_all_succeed() {
    let settings = Settings::new("openers");
    let mut rng = settings.rng();
    let dir = Dir::new();
    let reference = reference_layout(&dir);
    let mut widest = 0;
    let mut rounds = 0;
    for round in settings.rounds(15) {
        let round_dir = dir.sub(&format!("round{round}"));
        let db = round_dir.join("queue.db").to_str().unwrap().to_owned();
        let history_dir = round_dir.join("history");
        std::fs::create_dir(&history_dir).unwrap();
        widest = widest.max(open_at_once(&db, &history_dir, &mut rng));
        check_round(
            &db,
            &history_dir,
            &reference,
            &format!("openers round {round}"),
        );
        rounds += 1;
    }
    println!(
        "[openers] {rounds} rounds of {OPENERS} openers; opens began at most {widest} ms apart"
    );
}

#[test]
#[ignore = "torture test: make test-torture"]
fn a_file_whose_last_user_crashed_mid_write_opens_for_everyone() {
    let settings = Settings::new("openers-after-crash");
    let mut rng = settings.rng();
    let dir = Dir::new();
    let reference = reference_layout(&dir);
    let mut rounds = 0;
    for round in settings.rounds(8) {
        let round_dir = dir.sub(&format!("round{round}"));
        let db = round_dir.join("queue.db").to_str().unwrap().to_owned();
        let history_dir = round_dir.join("history");
        std::fs::create_dir(&history_dir).unwrap();
        let mut args = child_args(
            &db,
            &history_dir,
            "writer",
            rng.next(),
            now_ns() + 60_000_000_000,
        );
        args.extend([("threads", "2".into()), ("pad", "3000".into())]);
        let by_vfs = rng.chance(0.5);
        if by_vfs {
            let when = if rng.chance(0.5) { "after" } else { "before" };
            args.push(("crash", format!("{}:{when}", rng.range(10, 300))));
        }
        let mut writer = spawn("producer", &args);
        if by_vfs {
            let status = writer
                .wait_timeout(Duration::from_secs(30))
                .expect("the writer crashes");
            assert_eq!(status, None, "the writer ended by itself");
        } else {
            std::thread::sleep(Duration::from_millis(rng.range(20, 300)));
            History::create(&history_dir, "driver").info("kill", "target=writer");
            writer.kill();
        }
        open_at_once(&db, &history_dir, &mut rng);
        check_round(
            &db,
            &history_dir,
            &reference,
            &format!("openers after a crash, round {round}"),
        );
        rounds += 1;
    }
    println!("[openers-after-crash] {rounds} rounds: a writer killed mid-write, then {OPENERS} openers at once");
}
