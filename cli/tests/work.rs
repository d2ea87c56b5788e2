//! `tq work`: commands run once per task, failures, timeouts, heartbeats
//! and signals.

mod common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::{line_count, wait_for, Fixture};
use predicates::prelude::*;
use serde_json::json;

/// Starts `tq work FILE ARGS...` with standard output and error piped, in
/// a process group of its own, as a shell starts a job.
fn spawn_work(fixture: &Fixture, args: &[&str]) -> Child {
    std::process::Command::new(env!("CARGO_BIN_EXE_tq"))
        .process_group(0)
        .current_dir(fixture.dir.path())
        .arg("work")
        .arg(fixture.file())
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn signal(child: &Child, signal: libc::c_int) {
    // SAFETY: kill(2) takes plain integers.
    assert_eq!(unsafe { libc::kill(child.id() as libc::pid_t, signal) }, 0);
}

/// Signals every process of `child`'s group, as Ctrl-C at a terminal does.
fn signal_group(child: &Child, signal: libc::c_int) {
    // SAFETY: kill(2) takes plain integers.
    assert_eq!(
        unsafe { libc::kill(-(child.id() as libc::pid_t), signal) },
        0
    );
}

/// Reads `child`'s standard error up to a line containing `text`, and
/// returns the lines read.
fn read_stderr_until(child: &mut Child, text: &str) -> Vec<String> {
    let stderr = child.stderr.as_mut().unwrap();
    let mut lines = Vec::new();
    for line in BufReader::new(stderr).lines() {
        let line = line.unwrap();
        let found = line.contains(text);
        lines.push(line);
        if found {
            return lines;
        }
    }
    panic!("standard error ended without {text:?}: {lines:?}");
}

/// Whether process `pid` still runs (a zombie does not).
fn alive(pid: &str) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit(')')
            .next()
            .unwrap()
            .trim_start()
            .starts_with('Z'),
        Err(_) => false,
    }
}

#[test]
fn three_workers_run_twenty_tasks_exactly_once_each() {
    let fixture = Fixture::new();
    fixture.push_numbers(20, "default", &[]);
    // Each run records its task, attempt and payload, and how many runs
    // were going on at once.
    let script = r#"
        payload=$(cat)
        touch "running.$TQ_TASK_ID"
        ls running.* | wc -l >> concurrency
        sleep 0.3
        rm "running.$TQ_TASK_ID"
        echo "$TQ_TASK_ID $TQ_TASK_ATTEMPTS $TQ_QUEUE $payload" >> runs
    "#;
    let output = fixture
        .tq(
            "work",
            &[
                "-j",
                "3",
                "--until-empty",
                "--json",
                "--",
                "sh",
                "-c",
                script,
            ],
        )
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let summary: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(
        summary,
        json!({"done": 20, "failed": 0, "dead": 0, "lost": 0, "killed": 0, "cancelled": 0})
    );

    let runs = std::fs::read_to_string(fixture.path("runs")).unwrap();
    let mut seen = BTreeMap::new();
    for line in runs.lines() {
        let fields: Vec<&str> = line.splitn(4, ' ').collect();
        let id: i64 = fields[0].parse().unwrap();
        assert_eq!(fields[1], "1", "attempt: {line}");
        assert_eq!(fields[2], "default");
        assert_eq!(fields[3], format!("{{\"n\":{id}}}"), "payload: {line}");
        *seen.entry(id).or_insert(0) += 1;
    }
    assert_eq!(seen, (1..=20).map(|id| (id, 1)).collect::<BTreeMap<_, _>>());

    let concurrency = std::fs::read_to_string(fixture.path("concurrency")).unwrap();
    let most = concurrency
        .lines()
        .map(|line| line.trim().parse::<u32>().unwrap())
        .max()
        .unwrap();
    assert!((2..=3).contains(&most), "at most {most} ran at once");
    assert_eq!(fixture.json("stats", &[])["queues"], json!([]));
}

#[test]
fn failures_are_retried_then_dead_with_the_exit_status_and_stderr() {
    let fixture = Fixture::new();
    fixture.push_numbers(2, "default", &["--max-attempts", "3"]);
    let script = r#"
        echo "$TQ_TASK_ID $TQ_TASK_ATTEMPTS" >> runs
        printf 'first line\nattempt %s went wrong\n' "$TQ_TASK_ATTEMPTS" >&2
        exit 4
    "#;
    fixture
        .tq(
            "work",
            &[
                "-j",
                "2",
                "--until-empty",
                "--retry-delay",
                "0s",
                "--",
                "sh",
                "-c",
                script,
            ],
        )
        .assert()
        .success()
        .stdout("0 done, 4 failed (retried later), 2 dead\n")
        // The command's standard error passes through.
        .stderr(predicate::str::contains("attempt 3 went wrong"));
    let mut runs: Vec<String> = std::fs::read_to_string(fixture.path("runs"))
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    runs.sort();
    assert_eq!(runs, ["1 1", "1 2", "1 3", "2 1", "2 2", "2 3"]);
    let dead = fixture.json("list", &["--state", "dead"]);
    for task in dead.as_array().unwrap() {
        assert_eq!(task["attempts"], 3);
        assert_eq!(
            task["last_error"],
            "exit status 4: first line\nattempt 3 went wrong"
        );
    }
    assert_eq!(dead.as_array().unwrap().len(), 2);
    fixture
        .tq("list", &["--state", "dead"])
        .assert()
        .stdout(predicate::str::contains(
            "exit status 4: first line attempt 3 went wrong",
        ));
}

#[test]
fn with_result_a_commands_output_is_its_tasks_result() {
    let fixture = Fixture::new();
    fixture.push_numbers(3, "default", &["--max-attempts", "1"]);
    // Task 1 prints a JSON result, task 2 nothing, task 3 no JSON.
    let script = r#"
        case "$TQ_TASK_ID" in
            1) printf '{"pages": %s}\n' "$(cat)" ;;
            2) ;;
            3) echo 'not json' ;;
        esac
    "#;
    fixture
        .tq(
            "work",
            &["--until-empty", "--result", "--", "sh", "-c", script],
        )
        .assert()
        .success()
        .stdout("2 done, 0 failed (retried later), 1 dead\n");
    assert_eq!(
        fixture.json("show", &["1"])["result"],
        json!({"pages": {"n": 1}})
    );
    assert_eq!(
        fixture.json("wait", &["1"])["result"],
        json!({"pages": {"n": 1}})
    );
    // No output: the result is null, and the task is kept for it.
    let empty = fixture.json("wait", &["2"]);
    assert_eq!(
        (&empty["state"], &empty["result"]),
        (&json!("done"), &json!(null))
    );
    let dead = fixture.json("show", &["3"]);
    assert_eq!(dead["state"], "dead");
    assert!(
        dead["last_error"]
            .as_str()
            .unwrap()
            .starts_with("its output is no result: the result is not JSON"),
        "{dead}"
    );
}

#[test]
fn a_command_past_its_timeout_is_killed_and_its_task_failed() {
    let fixture = Fixture::new();
    fixture.push_numbers(1, "default", &[]);
    let started = Instant::now();
    fixture
        .tq(
            "work",
            &[
                "--until-empty",
                "--timeout",
                "300ms",
                "--",
                "sh",
                "-c",
                "sleep 30 & echo $! > sleeper; echo started >&2; wait",
            ],
        )
        .assert()
        .success()
        .stdout("0 done, 1 failed (retried later), 0 dead\n");
    assert!(started.elapsed() < Duration::from_secs(10));
    let task = fixture.json("show", &["1"]);
    assert_eq!(task["state"], "pending");
    assert_eq!(task["attempts"], 1);
    assert_eq!(task["last_error"], "timed out after 300ms: started");
    // The command's own children are killed with it.
    let sleeper = std::fs::read_to_string(fixture.path("sleeper")).unwrap();
    wait_for("the command's child to die", || !alive(sleeper.trim()));
}

#[test]
fn a_command_that_cannot_start_stops_the_pool_with_an_error() {
    let fixture = Fixture::new();
    fixture.push_numbers(2, "default", &[]);
    fixture
        .tq("work", &["--until-empty", "--", "./no-such-command"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "could not run \"./no-such-command\": No such file or directory",
        ));
    let task = fixture.json("show", &["1"]);
    assert_eq!(task["attempts"], 1);
    assert!(task["last_error"]
        .as_str()
        .unwrap()
        .starts_with("could not run"));
    assert_eq!(fixture.json("show", &["2"])["attempts"], 0);
}

#[test]
fn nothing_to_do_exits_with_3() {
    let fixture = Fixture::new();
    fixture
        .tq("push", &["{}", "--delay", "1h"])
        .assert()
        .success();
    fixture
        .tq("work", &["--until-empty", "--", "true"])
        .assert()
        .code(3)
        .stdout("0 done, 0 failed (retried later), 0 dead\n")
        .stderr("tq: no task ready in queue \"default\"\n");
}

#[test]
fn max_tasks_stops_after_that_many() {
    let fixture = Fixture::new();
    fixture.push_numbers(10, "default", &[]);
    fixture
        .tq("work", &["-j", "3", "--max-tasks", "4", "--", "true"])
        .assert()
        .success()
        .stdout("4 done, 0 failed (retried later), 0 dead\n");
    assert_eq!(fixture.ids("pending"), (5..=10).collect::<Vec<_>>());
}

#[test]
fn a_waiting_worker_takes_tasks_pushed_later_and_extends_leases() {
    let fixture = Fixture::new();
    fixture.push_numbers(0, "default", &[]);
    // Two workers, a lease of 300 ms and a command that takes 1.2 s: the
    // idle worker would take the task again if the lease were not extended.
    let work = spawn_work(
        &fixture,
        &[
            "-j",
            "2",
            "--lease",
            "300ms",
            "--",
            "sh",
            "-c",
            "echo start >> runs; sleep 1.2; echo end >> runs",
        ],
    );
    fixture.tq("push", &["{}"]).assert().success();
    wait_for("the command to end", || {
        line_count(&fixture.path("runs")) == 2
    });
    std::thread::sleep(Duration::from_millis(500));
    signal(&work, libc::SIGINT);
    let output = work.wait_with_output().unwrap();
    assert!(output.status.success(), "{output:?}");
    assert_eq!(
        std::fs::read_to_string(fixture.path("runs")).unwrap(),
        "start\nend\n"
    );
    assert_eq!(
        String::from_utf8(output.stdout).unwrap(),
        "1 done, 0 failed (retried later), 0 dead\n"
    );
}

#[test]
fn sigint_stops_pulling_and_waits_for_running_commands() {
    let fixture = Fixture::new();
    fixture.push_numbers(5, "default", &[]);
    let mut work = spawn_work(
        &fixture,
        &[
            "-j",
            "2",
            "--",
            "sh",
            "-c",
            "touch started.$TQ_TASK_ID; sleep 1; echo $TQ_TASK_ID >> finished",
        ],
    );
    let started = || {
        std::fs::read_dir(fixture.dir.path())
            .unwrap()
            .filter(|entry| {
                let name = entry.as_ref().unwrap().file_name();
                name.to_string_lossy().starts_with("started.")
            })
            .count()
    };
    wait_for("two commands to start", || started() == 2);
    // Ctrl-C at a terminal: the commands run in their own process groups,
    // so only tq gets it, and lets them finish.
    signal_group(&work, libc::SIGINT);
    read_stderr_until(&mut work, "stopping: waiting for 2 running commands");
    let output = work.wait_with_output().unwrap();
    assert!(output.status.success(), "{output:?}");
    assert_eq!(
        String::from_utf8(output.stdout).unwrap(),
        "2 done, 0 failed (retried later), 0 dead\n"
    );
    assert_eq!(line_count(&fixture.path("finished")), 2);
    assert_eq!(started(), 2);
    let counts = fixture.counts("default");
    assert_eq!(
        (counts["pending"].clone(), counts["leased"].clone()),
        (json!(3), json!(0))
    );
}

#[test]
fn a_second_signal_kills_the_commands_and_leaves_their_tasks_to_recovery() {
    let fixture = Fixture::new();
    fixture.push_numbers(3, "default", &[]);
    let mut work = spawn_work(
        &fixture,
        &["-j", "2", "--", "sh", "-c", "echo $$ >> started; sleep 30"],
    );
    wait_for("two commands to start", || {
        line_count(&fixture.path("started")) == 2
    });
    let began = Instant::now();
    signal(&work, libc::SIGTERM);
    read_stderr_until(&mut work, "stopping:");
    signal(&work, libc::SIGINT);
    let stderr = read_stderr_until(&mut work, "stopped by a second signal");
    assert!(
        stderr
            .last()
            .unwrap()
            .contains("2 commands killed, their tasks left leased for `tq recover"),
        "{stderr:?}"
    );
    let status = work.wait().unwrap();
    assert_eq!(status.code(), Some(1));
    assert!(began.elapsed() < Duration::from_secs(10));
    for pid in std::fs::read_to_string(fixture.path("started"))
        .unwrap()
        .lines()
    {
        wait_for("a killed command to die", || !alive(pid));
    }
    let counts = fixture.counts("default");
    assert_eq!(
        (counts["pending"].clone(), counts["leased"].clone()),
        (json!(1), json!(2))
    );
    assert_eq!(
        fixture.json("recover", &[]),
        json!({"recovered": 2, "queues": [{"queue": "default", "recovered": 2}]})
    );
    assert_eq!(fixture.counts("default")["pending"], 3);
}

#[test]
fn a_task_cancelled_while_its_command_runs_stops_the_command_with_sigterm_at_once() {
    let fixture = Fixture::new();
    fixture.push_numbers(1, "default", &[]);
    // The command records SIGTERM and ends; without it, it would run on.
    // Its first heartbeat is 20 minutes away: only the cancellation's ring
    // can stop it within the test.
    let mut work = spawn_work(
        &fixture,
        &[
            "--lease",
            "1h",
            "--",
            "sh",
            "-c",
            "trap 'echo terminated >> signals; exit 0' TERM; touch started; \
             while :; do sleep 0.05; done",
        ],
    );
    wait_for("the command to start", || fixture.path("started").exists());
    fixture
        .tq("cancel", &["1", "--reason", "stop"])
        .assert()
        .success();
    wait_for("the command to get SIGTERM", || {
        fixture.path("signals").exists()
    });
    read_stderr_until(&mut work, "task 1: cancelled while its command ran");
    signal(&work, libc::SIGINT);
    let output = work.wait_with_output().unwrap();
    assert!(output.status.success(), "{output:?}");
    assert_eq!(
        std::fs::read_to_string(fixture.path("signals")).unwrap(),
        "terminated\n"
    );
    assert_eq!(
        String::from_utf8(output.stdout).unwrap(),
        "0 done, 0 failed (retried later), 0 dead, 1 cancelled\n"
    );
    let counts = fixture.counts("default");
    assert_eq!(
        (counts["pending"].clone(), counts["leased"].clone()),
        (json!(0), json!(0))
    );
}

/// On PostgreSQL, when `TQ_TEST_POSTGRES_URL` and `TQ_TEST_POSTGRES_DIR`
/// name a test server and its directory (`make test-postgres` sets both):
/// `tq work` waiting for tasks goes on across a restart of the server,
/// its pulls refused meanwhile tried again, and works what is pushed once
/// the server is back.
#[test]
fn postgres_work_goes_on_across_a_server_restart() {
    let (Ok(url), Ok(server_dir)) = (
        std::env::var("TQ_TEST_POSTGRES_URL"),
        std::env::var("TQ_TEST_POSTGRES_DIR"),
    ) else {
        eprintln!("skipped: TQ_TEST_POSTGRES_URL or TQ_TEST_POSTGRES_DIR is not set (`make test-postgres` sets both)");
        return;
    };
    let fixture = Fixture {
        dir: tempfile::tempdir().unwrap(),
        file: url.into(),
    };
    let queue = format!("work_restart_{}", std::process::id());
    let push = |count: usize| {
        wait_for("a push the server takes", || {
            fixture
                .tq("push", &["--queue", &queue])
                .write_stdin("{}\n".repeat(count))
                .output()
                .unwrap()
                .status
                .success()
        })
    };
    let mut work = spawn_work(
        &fixture,
        &[
            "--queue",
            &queue,
            "-j",
            "2",
            "--",
            "sh",
            "-c",
            "echo ran >> runs",
        ],
    );
    push(5);
    wait_for("five runs", || line_count(&fixture.path("runs")) == 5);
    let restart = std::process::Command::new(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/postgres/cluster.sh"),
    )
    .args(["restart", &server_dir, "immediate"])
    .output()
    .unwrap();
    assert!(restart.status.success(), "{restart:?}");
    push(5);
    wait_for("ten runs", || line_count(&fixture.path("runs")) == 10);
    assert!(
        work.try_wait().unwrap().is_none(),
        "tq work ended during the restart"
    );
    signal(&work, libc::SIGINT);
    let output = work.wait_with_output().unwrap();
    assert!(output.status.success(), "{output:?}");
    assert_eq!(
        String::from_utf8(output.stdout).unwrap(),
        "10 done, 0 failed (retried later), 0 dead\n"
    );
}
