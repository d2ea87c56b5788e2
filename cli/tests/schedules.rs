//! `tq schedule add/list/rm/pause/resume`, and `tq work` enqueueing a
//! schedule's slots by itself.

mod common;

use assert_cmd::Command;
use common::Fixture;
use predicates::prelude::*;
use serde_json::{json, Value};

/// `tq schedule ACTION FILE ARGS...`.
fn schedule(fixture: &Fixture, action: &str, args: &[&str]) -> Command {
    let mut command = Command::cargo_bin("tq").unwrap();
    command
        .current_dir(fixture.dir.path())
        .args(["schedule", action, fixture.file()])
        .args(args)
        .env_remove("COLUMNS");
    command
}

fn listed(fixture: &Fixture) -> Value {
    let output = schedule(fixture, "list", &["--json"]).output().unwrap();
    assert!(output.status.success());
    serde_json::from_slice(&output.stdout).unwrap()
}

#[test]
fn schedules_are_added_listed_paused_and_removed() {
    let fixture = Fixture::new();
    schedule(
        &fixture,
        "add",
        &[
            "nightly",
            r#"{"report": "daily"}"#,
            "--cron",
            "0 2 * * *",
            "--tz",
            "Europe/Paris",
            "--priority",
            "-3",
            "--max-attempts",
            "2",
        ],
    )
    .assert()
    .success()
    .stdout(predicate::str::is_match(
        r#"^added schedule "nightly" in queue "default": next slot \d{4}-\d\d-\d\dT01:00:00.000Z \(in .+\)\n$"#,
    ).unwrap());
    schedule(
        &fixture,
        "add",
        &[
            "sync",
            "{}",
            "--every",
            "5m",
            "--catch-up",
            "each",
            "--catch-up-limit",
            "12",
        ],
    )
    .assert()
    .success();
    let schedules = listed(&fixture);
    assert_eq!(schedules.as_array().unwrap().len(), 2);
    let nightly = &schedules[0];
    assert_eq!(
        (
            &nightly["name"],
            &nightly["cron"],
            &nightly["time_zone"],
            &nightly["payload"],
            &nightly["priority"],
            &nightly["max_attempts"],
            &nightly["catch_up"],
            &nightly["paused"],
        ),
        (
            &json!("nightly"),
            &json!("0 2 * * *"),
            &json!("Europe/Paris"),
            &json!({"report": "daily"}),
            &json!(-3),
            &json!(2),
            &json!("one"),
            &json!(false),
        )
    );
    let sync = &schedules[1];
    assert_eq!(
        (
            &sync["every_ms"],
            &sync["catch_up"],
            &sync["catch_up_limit"]
        ),
        (&json!(300_000), &json!("each"), &json!(12))
    );
    schedule(&fixture, "list", &[]).assert().success().stdout(
        predicate::str::is_match(
            r"(?m)^nightly +0 2 \* \* \* \(Europe/Paris\) +\S+ \(in .+\) +one +active +\{",
        )
        .unwrap()
        .and(
            predicate::str::is_match(r"(?m)^sync +every 5m +.+ +each \(up to 12\) +active +\{\}$")
                .unwrap(),
        ),
    );

    schedule(&fixture, "pause", &["sync"])
        .assert()
        .success()
        .stdout("paused \"sync\" in queue \"default\"\n");
    assert_eq!(listed(&fixture)[1]["paused"], json!(true));
    schedule(&fixture, "resume", &["sync"]).assert().success();
    assert_eq!(listed(&fixture)[1]["paused"], json!(false));
    // Each name not found is named; the others are still removed.
    schedule(&fixture, "rm", &["nightly", "nope", "--json"])
        .assert()
        .code(1)
        .stdout("{\"queue\":\"default\",\"refused\":[\"nope\"],\"removed\":[\"nightly\"]}\n")
        .stderr(predicate::str::contains("no schedule named 'nope'"));
    assert_eq!(listed(&fixture).as_array().unwrap().len(), 1);
}

#[test]
fn bad_schedules_are_refused_naming_the_problem_and_nothing_is_stored() {
    let fixture = Fixture::new();
    schedule(&fixture, "add", &["a", "{}", "--every", "1m"])
        .assert()
        .success();
    schedule(&fixture, "add", &["a", "{}", "--every", "1m"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("already has a schedule named 'a'"));
    schedule(&fixture, "add", &["b", "{}", "--cron", "61 * * * *"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("'61 * * * *'"));
    schedule(
        &fixture,
        "add",
        &["b", "{}", "--cron", "@daily", "--tz", "Mars/Olympus"],
    )
    .assert()
    .code(1)
    .stderr(predicate::str::contains("'Mars/Olympus'"));
    schedule(&fixture, "add", &["b", "not json", "--every", "1m"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("not JSON"));
    // Usage errors: no spec, both, a zone on an interval.
    schedule(&fixture, "add", &["b", "{}"]).assert().code(2);
    schedule(
        &fixture,
        "add",
        &["b", "{}", "--every", "1m", "--cron", "@daily"],
    )
    .assert()
    .code(2);
    schedule(
        &fixture,
        "add",
        &["b", "{}", "--every", "1m", "--tz", "UTC"],
    )
    .assert()
    .code(2);
    assert_eq!(listed(&fixture).as_array().unwrap().len(), 1);
    // --replace overwrites.
    schedule(&fixture, "add", &["a", "[2]", "--every", "2m", "--replace"])
        .assert()
        .success();
    assert_eq!(listed(&fixture)[0]["payload"], json!([2]));
}

#[test]
fn a_worker_enqueues_the_slots_of_a_schedule_by_itself() {
    let fixture = Fixture::new();
    schedule(
        &fixture,
        "add",
        &["tick", r#"{"tick": true}"#, "--every", "300ms"],
    )
    .assert()
    .success();
    let output = Command::cargo_bin("tq")
        .unwrap()
        .current_dir(fixture.dir.path())
        .args(["work", fixture.file(), "--max-tasks", "2", "--", "cat"])
        .timeout(std::time::Duration::from_secs(30))
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(stdout.matches(r#"{"tick": true}"#).count(), 2, "{stdout}");
}

#[test]
fn schedule_commands_have_help_with_examples() {
    for action in ["add", "list", "rm", "pause", "resume"] {
        Command::cargo_bin("tq")
            .unwrap()
            .args(["schedule", action, "--help"])
            .assert()
            .success()
            .stdout(predicate::str::contains("Example"));
    }
}
