//! No password given in a PostgreSQL URL ever reaches the command's output:
//! every command is run with a URL carrying one, against a server that
//! refuses the connection and, when `TQ_TEST_POSTGRES_URL` names one,
//! against a working server; the database URL can also come from
//! `TQ_DATABASE_URL`, out of sight of `ps` and the shell's history.

mod common;

use assert_cmd::Command;
use common::Fixture;

const PASSWORD: &str = "s3cret";

/// Every command, with the arguments after the location that make it run;
/// those that act on one queue are also given `--queue`.
const COMMANDS: &[(&str, &[&str])] = &[
    ("stats", &[]),
    ("stats", &["--json"]),
    ("push", &["{\"n\": 1}"]),
    ("push", &["--json", "{\"n\": 2}"]),
    ("list", &["--state", "pending"]),
    ("list", &["--state", "dead", "--json"]),
    ("show", &["1"]),
    ("show", &["1", "--json"]),
    ("retry", &["1"]),
    ("retry", &["--all-dead"]),
    ("purge", &["--dead"]),
    ("recover", &[]),
    ("checkpoint", &[]),
    ("work", &["--until-empty", "--", "true"]),
];

/// `tq` without `TQ_DATABASE_URL`, run in `dir`.
fn tq_in(dir: &std::path::Path) -> Command {
    let mut command = Command::cargo_bin("tq").unwrap();
    command
        .current_dir(dir)
        .env_remove("TQ_DATABASE_URL")
        .env_remove("COLUMNS");
    command
}

/// `tq` without `TQ_DATABASE_URL`, run in a directory of its own.
fn tq() -> Command {
    tq_in(&std::env::temp_dir())
}

/// Runs every command on `location` and checks that
/// the password shows nowhere while `expected` (the user, the host) does
/// show in any message about the location.
fn assert_no_command_prints_the_password(location: &str, queue: &str, expected: &[&str]) {
    for (command, args) in COMMANDS {
        let output = tq()
            .arg(command)
            .arg(location)
            .args(if *command == "checkpoint" {
                vec![]
            } else {
                vec!["--queue", queue]
            })
            .args(*args)
            .output()
            .unwrap();
        let shown = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(
            !shown.contains(PASSWORD),
            "tq {command} {args:?} printed the password: {shown}"
        );
        if !output.status.success() && output.status.code() != Some(3) {
            for part in expected {
                assert!(
                    shown.contains(part),
                    "tq {command} {args:?} failed without naming {part:?}: {shown}"
                );
            }
        }
    }
}

#[test]
fn a_refused_server_is_named_without_the_password() {
    for location in [
        format!("postgres://alice:{PASSWORD}@127.0.0.1:1/db"),
        format!("postgresql://alice@127.0.0.1:1/db?password={PASSWORD}&connect_timeout=5"),
    ] {
        assert_no_command_prints_the_password(&location, "default", &["alice", "127.0.0.1"]);
    }
}

/// `TQ_TEST_POSTGRES_URL` with a password put in: the test servers trust
/// local connections, so the password is carried but not needed.
fn test_server_url_with_password() -> Option<String> {
    let url = std::env::var("TQ_TEST_POSTGRES_URL").ok()?;
    let (scheme, rest) = url.split_once("://")?;
    let (user, host) = rest.split_once('@')?;
    let user = user.split(':').next()?;
    Some(format!("{scheme}://{user}:{PASSWORD}@{host}"))
}

#[test]
fn a_working_server_is_shown_without_the_password() {
    let Some(url) = test_server_url_with_password() else {
        eprintln!("skipped: TQ_TEST_POSTGRES_URL is not set");
        return;
    };
    let queue = format!("secrets{}", std::process::id());
    assert_no_command_prints_the_password(&url, &queue, &[]);
    let stats = tq()
        .args(["stats", &url, "--queue", &queue, "--json"])
        .output()
        .unwrap();
    assert!(stats.status.success(), "{stats:?}");
    let stats: serde_json::Value = serde_json::from_slice(&stats.stdout).unwrap();
    assert_eq!(
        stats["file"],
        tq::redacted_location(&url),
        "stats --json names the database without the password"
    );
}

#[test]
fn the_location_comes_from_tq_database_url_when_omitted_or_dash() {
    let fixture = Fixture::new();
    let tq = || tq_in(fixture.dir.path());
    tq().env("TQ_DATABASE_URL", fixture.file())
        .args(["push", "-", "{\"n\": 1}"])
        .assert()
        .success();
    for args in [&["stats", "--json"][..], &["stats", "-", "--json"]] {
        let output = tq()
            .env("TQ_DATABASE_URL", fixture.file())
            .args(args)
            .output()
            .unwrap();
        assert!(output.status.success(), "{output:?}");
        let stats: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        assert_eq!(stats["queues"][0]["pending"], 1, "{stats}");
    }
    let output = tq().args(["stats"]).output().unwrap();
    assert_eq!(output.status.code(), Some(2), "a usage error: {output:?}");
    let message = String::from_utf8_lossy(&output.stderr);
    assert!(message.contains("TQ_DATABASE_URL"), "{message}");
    assert!(!fixture.path("-").exists(), "`-` is never a file name");
}

#[test]
fn a_password_from_the_environment_is_not_printed_either() {
    let fixture = Fixture::new();
    let output = tq_in(fixture.dir.path())
        .env(
            "TQ_DATABASE_URL",
            format!("postgres://alice:{PASSWORD}@127.0.0.1:1/db"),
        )
        .args(["stats", "-"])
        .output()
        .unwrap();
    let message = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert!(!message.contains(PASSWORD), "{message}");
    assert!(message.contains("alice@127.0.0.1:1/db"), "{message}");
}
