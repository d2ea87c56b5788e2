//! Every command but `tq work`, run as a user would: output as tables and
//! as JSON, exit statuses, and bad input.

mod common;

use assert_cmd::Command;
use common::Fixture;
use predicates::prelude::*;
use serde_json::json;

#[test]
fn version_names_the_command_and_the_library() {
    let version = env!("CARGO_PKG_VERSION");
    Command::cargo_bin("tq")
        .unwrap()
        .arg("--version")
        .assert()
        .success()
        .stdout(format!("tq {version} (library {})\n", tq::VERSION));
}

#[test]
fn every_command_has_help_with_examples() {
    for command in [
        "stats",
        "push",
        "list",
        "show",
        "wait",
        "retry",
        "cancel",
        "pause",
        "resume",
        "limit",
        "purge",
        "recover",
        "checkpoint",
        "work",
    ] {
        Command::cargo_bin("tq")
            .unwrap()
            .args([command, "--help"])
            .assert()
            .success()
            .stdout(predicate::str::contains("Example"));
    }
}

#[test]
fn a_missing_file_is_a_clear_error_and_is_not_created() {
    let fixture = Fixture::new();
    for (command, args) in [
        ("stats", &[][..]),
        ("list", &[][..]),
        ("show", &["1"][..]),
        ("retry", &["--all-dead"][..]),
        ("purge", &["--dead"][..]),
        ("recover", &[][..]),
        ("checkpoint", &[][..]),
        ("work", &["--until-empty", "true"][..]),
    ] {
        fixture
            .tq(command, args)
            .assert()
            .code(1)
            .stderr(predicate::str::contains("jobs.db: no such file"));
    }
    assert!(!fixture.file.exists());
}

#[test]
fn a_file_that_is_not_a_queue_is_refused() {
    let fixture = Fixture::new();
    std::fs::write(&fixture.file, "not a database, just text").unwrap();
    fixture
        .tq("stats", &[])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("jobs.db:"));
    assert_eq!(
        std::fs::read(&fixture.file).unwrap(),
        b"not a database, just text"
    );
}

#[test]
fn usage_errors_exit_with_2() {
    let fixture = Fixture::new();
    fixture.tq("push", &["{}"]).assert().success();
    for (command, args) in [
        ("list", &["--state", "sleeping"][..]),
        ("list", &["--limit", "0"][..]),
        ("retry", &[][..]),
        ("retry", &["3", "--all-dead"][..]),
        ("purge", &[][..]),
        ("purge", &["--older-than", "1d"][..]),
        (
            "purge",
            &["--done-older-than", "1d", "--older-than", "1d"][..],
        ),
        ("push", &["{}", "--delay", "soon"][..]),
        ("push", &["--unique-key", "k"][..]),
        ("push", &["{}", "--max-attempts", "0"][..]),
        ("push", &["{}", "--replace-pending"][..]),
        ("push", &["{}", "--debounce", "1m"][..]),
        ("stats", &["--queue", ""][..]),
        ("work", &[][..]),
    ] {
        fixture
            .tq(command, args)
            .assert()
            .code(2)
            .stderr(predicate::str::contains("error:"));
    }
    fixture
        .tq("list", &["--state", "sleeping"])
        .assert()
        .stderr(predicate::str::contains("pending, leased, dead, done"));
}

#[test]
fn push_after_tasks_and_see_what_a_task_waits_for() {
    let fixture = Fixture::new();
    fixture.tq("push", &["1"]).assert().success();
    fixture.tq("push", &["2"]).assert().success();
    fixture
        .tq("push", &[r#"{"report": 1}"#, "--after", "1", "2"])
        .assert()
        .success()
        .stdout("pushed task 3 to queue \"default\"\n");
    fixture
        .tq("show", &["3"])
        .assert()
        .success()
        .stdout(predicate::str::contains("state       pending\n"))
        .stdout(predicate::str::contains("waits for   1 2\n"));
    assert_eq!(fixture.json("show", &["3"])["waiting_for"], json!([1, 2]));
    assert!(fixture.json("show", &["1"]).get("waiting_for").is_none());
    fixture
        .tq("push", &["4", "--after", "99"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("no task 99"));
    fixture.tq("push", &["4", "--run-anyway"]).assert().code(2);
}

#[test]
fn push_to_a_group_and_see_the_group_in_show_and_stats() {
    let fixture = Fixture::new();
    for payload in ["1", "2"] {
        fixture
            .tq("push", &[payload, "--group", "customer:42"])
            .assert()
            .success();
    }
    fixture
        .tq("push", &["3", "--group", "wide", "--group-max", "2"])
        .assert()
        .success();
    fixture
        .tq("show", &["2"])
        .assert()
        .success()
        .stdout(predicate::str::contains("group       customer:42\n"))
        .stdout(predicate::str::contains("waits for   1\n"));
    let shown = fixture.json("show", &["2"]);
    assert_eq!(shown["group"], "customer:42");
    assert_eq!(shown["waiting_for"], json!([1]));
    assert!(fixture.json("show", &["3"]).get("waiting_for").is_none());
    fixture
        .tq("push", &["4", "--group", "g", "--group-max", "0"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("at once"));
    fixture
        .tq("push", &["4", "--group-max", "2"])
        .assert()
        .code(2);
    let stats = &fixture.json("stats", &[])["queues"][0];
    assert_eq!(stats["pending"], 3);
    assert_eq!(stats["groups_waiting"], 1, "customer:42 has task 2 waiting");
}

#[test]
fn push_one_task_and_see_it_in_stats_list_and_show() {
    let fixture = Fixture::new();
    fixture
        .tq("push", &[r#"{"file": "a.mp4",  "spaced": true}"#])
        .assert()
        .success()
        .stdout("pushed task 1 to queue \"default\"\n");
    let pushed = fixture.json("push", &[r#"{"file":"b.mp4"}"#, "--priority", "-5"]);
    assert_eq!(
        pushed,
        json!({"queue": "default", "id": 2, "duplicate": false, "merged": false})
    );

    let stats = fixture.json("stats", &[]);
    assert_eq!(stats["queues"].as_array().unwrap().len(), 1);
    let default = &stats["queues"][0];
    assert_eq!(default["queue"], "default");
    assert_eq!(default["pending"], 2);
    assert_eq!(default["leased"], 0);
    assert_eq!(default["dead"], 0);
    assert_eq!(default["done"], 0);
    assert!(default["oldest_ready_age_ms"].as_u64().is_some());
    assert!(stats["wal_bytes"].as_u64().is_some());
    fixture
        .tq("stats", &[])
        .assert()
        .success()
        .stdout(
            predicate::str::is_match(
                r"(?m)^QUEUE +PENDING +LEASED +DEAD +DONE +CANCELLED +GROUPS WAITING +OLDEST READY +LIMIT +PAUSED$",
            )
            .unwrap(),
        )
        .stdout(predicate::str::is_match(r"(?m)^default +2 +0 +0 +0 +0 +0 +\d+s +- +-$").unwrap())
        .stdout(predicate::str::contains("write-ahead log: "));

    let listed = fixture.json("list", &[]);
    assert_eq!(listed.as_array().unwrap().len(), 2);
    assert_eq!(
        listed[0]["payload"],
        json!({"file": "a.mp4", "spaced": true})
    );
    assert_eq!(listed[1]["priority"], -5);
    assert_eq!(listed[1]["state"], "pending");
    assert_eq!(listed[1]["attempts"], 0);
    assert_eq!(listed[1]["max_attempts"], 25);
    fixture
        .tq("list", &[])
        .assert()
        .success()
        .stdout(
            predicate::str::is_match(r"(?m)^ID +STATE +ATTEMPTS +RUN AT +LAST REASON +PAYLOAD$")
                .unwrap(),
        )
        .stdout(
            predicate::str::is_match(
                r#"(?m)^1 +pending +0/25 +now +\{"file": "a.mp4", "spaced": true\}$"#,
            )
            .unwrap(),
        );

    // show prints the payload byte for byte, and finds a task in any queue.
    fixture
        .tq("show", &["1"])
        .assert()
        .success()
        .stdout(predicate::str::contains("state       pending\n"))
        .stdout(predicate::str::ends_with(
            "payload\n{\"file\": \"a.mp4\",  \"spaced\": true}\n",
        ));
    fixture
        .tq("push", &["[3]", "-q", "emails"])
        .assert()
        .success();
    let shown = fixture.json("show", &["3"]);
    assert_eq!(shown["queue"], "emails");
    assert_eq!(shown["payload"], json!([3]));
    fixture
        .tq("show", &["3", "--queue", "default"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("queue \"default\" has no task 3"));
    // --json keeps the payload's text: key order, numbers, spacing.
    fixture
        .tq("push", &[r#"{"b": 1.0, "a": [1e3]}"#])
        .assert()
        .stdout("pushed task 4 to queue \"default\"\n");
    fixture
        .tq("show", &["4", "--json"])
        .assert()
        .stdout(predicate::str::ends_with(
            r#","payload":{"b": 1.0, "a": [1e3]},"progress":null,"result":null}
"#,
        ));
    fixture
        .tq("show", &["99"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("no task 99"));
}

#[test]
fn stats_lists_every_queue_or_the_one_asked_for() {
    let fixture = Fixture::new();
    fixture.push_numbers(3, "emails", &[]);
    fixture.push_numbers(2, "videos", &["--delay", "1h"]);
    let stats = fixture.json("stats", &[]);
    let queues: Vec<&str> = stats["queues"]
        .as_array()
        .unwrap()
        .iter()
        .map(|queue| queue["queue"].as_str().unwrap())
        .collect();
    assert_eq!(queues, ["emails", "videos"]);
    // Delayed tasks are pending but not ready: no oldest ready age.
    assert_eq!(stats["queues"][1]["pending"], 2);
    assert_eq!(stats["queues"][1]["oldest_ready_age_ms"], json!(null));

    let only = fixture.json("stats", &["--queue", "nothing-here"]);
    assert_eq!(
        only["queues"],
        json!([{
            "queue": "nothing-here", "pending": 0, "leased": 0, "dead": 0, "done": 0,
            "cancelled": 0, "groups_waiting": 0, "oldest_ready_age_ms": null,
            "concurrency_limit": null,
            "rate_limit": null,
            "max_pending": null,
            "paused": false, "paused_until": null,
        }])
    );
}

#[test]
fn stats_watch_refreshes_with_rates() {
    let fixture = Fixture::new();
    fixture.push_numbers(1, "default", &[]);
    let mut watch = std::process::Command::new(env!("CARGO_BIN_EXE_tq"))
        .args(["stats", fixture.file(), "--watch", "300ms", "--json"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(watch.stdout.take().unwrap()));
    let first: serde_json::Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    assert!(first.get("rates").is_none());
    fixture.push_numbers(30, "default", &[]);
    // The pushes land within one of the next intervals.
    let mut pushed = 0.0;
    let mut finished = 0.0;
    for _ in 0..3 {
        let sample: serde_json::Value =
            serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
        let rates = &sample["rates"];
        let seconds = rates["interval_s"].as_f64().unwrap();
        assert!(seconds > 0.2, "{sample}");
        pushed += rates["pushed_per_s"].as_f64().unwrap() * seconds;
        finished += rates["finished_per_s"].as_f64().unwrap() * seconds;
        assert_eq!(rates["dead_per_s"], 0.0);
    }
    watch.kill().unwrap();
    watch.wait().unwrap();
    assert!((pushed - 30.0).abs() < 0.01, "pushed {pushed}");
    assert!(finished.abs() < 0.01, "finished {finished}");
}

#[test]
fn push_from_standard_input_in_batches() {
    let fixture = Fixture::new();
    let mut input: String = (1..=2500).map(|n| format!("{{\"n\":{n}}}\n")).collect();
    input.push_str("\n   \n"); // blank lines are skipped
    fixture
        .tq(
            "push",
            &["--batch", "1000", "--priority", "3", "--max-attempts", "4"],
        )
        .write_stdin(input)
        .assert()
        .success()
        // No progress bar when standard error is not a terminal.
        .stderr("")
        .stdout("pushed 2500 tasks to queue \"default\"\n");
    let first = fixture.json("show", &["1"]);
    assert_eq!(first["priority"], 3);
    assert_eq!(first["max_attempts"], 4);
    let pushed = fixture
        .tq("push", &[])
        .arg("--json")
        .write_stdin("{\"a\":1}\r\n[2]\n")
        .assert()
        .success();
    assert_eq!(
        serde_json::from_slice::<serde_json::Value>(&pushed.get_output().stdout).unwrap(),
        json!({"queue": "default", "pushed": 2})
    );
    // A line ending in CRLF is stored without the CR.
    assert_eq!(fixture.json("show", &["2501"])["payload"], json!({"a": 1}));
    fixture
        .tq("show", &["2501"])
        .assert()
        .stdout(predicate::str::ends_with("payload\n{\"a\":1}\n"));
}

#[test]
fn a_bad_line_names_its_number_and_earlier_batches_stay() {
    let fixture = Fixture::new();
    let input = "{\"n\":1}\n{\"n\":2}\n\n{\"n\":3}\n{\"n\": oops}\n{\"n\":5}\n";
    fixture
        .tq("push", &["--batch", "2"])
        .write_stdin(input)
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "line 5: the payload is not JSON: expected value at line 1 column 7 \
             (the 2 tasks before line 4 were stored, nothing from it on)",
        ));
    assert_eq!(fixture.ids("pending"), [1, 2]);

    let fresh = Fixture::new();
    fresh
        .tq("push", &[])
        .write_stdin("{}\n{\"truncated\": \n")
        .assert()
        .code(1)
        .stderr(predicate::str::contains("line 2: the payload is not JSON"))
        .stderr(predicate::str::contains("(nothing was stored)"));
    assert_eq!(fresh.counts("default")["pending"], 0);

    fresh
        .tq("push", &[])
        .write_stdin(b"{}\n\"\xff\"\n".to_vec())
        .assert()
        .code(1)
        .stderr(predicate::str::contains("line 2: not UTF-8"));
    fresh
        .tq("push", &["not json"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("the payload is not JSON"));
}

#[test]
fn push_with_delay_and_unique_key() {
    let fixture = Fixture::new();
    fixture
        .tq("push", &["{}", "--delay", "1h"])
        .assert()
        .success();
    let task = fixture.json("show", &["1"]);
    let due_in = task["run_at_unix_ms"].as_i64().unwrap() - now_unix_ms();
    assert!((3_590_000..=3_600_000).contains(&due_in), "{due_in}");
    fixture
        .tq("list", &[])
        .assert()
        .stdout(predicate::str::contains("in 59m 59s").or(predicate::str::contains("in 1h")));

    let first = fixture.json("push", &["{\"i\":1}", "--unique-key", "invoice:7"]);
    assert_eq!(
        first,
        json!({"queue": "default", "id": 2, "duplicate": false, "merged": false})
    );
    let again = fixture.json("push", &["{\"i\":2}", "--unique-key", "invoice:7"]);
    assert_eq!(
        again,
        json!({"queue": "default", "id": 2, "duplicate": true, "merged": false})
    );
    fixture
        .tq("push", &["{\"i\":3}", "--unique-key", "invoice:7"])
        .assert()
        .success()
        .stdout("pushed nothing to queue \"default\": task 2 holds the key \"invoice:7\"\n");
    assert_eq!(fixture.ids("pending"), [1, 2]);
}

#[test]
fn push_replacing_and_debouncing_merges_into_the_pending_holder() {
    let fixture = Fixture::new();
    let first = fixture.json("push", &["{\"v\":1}", "--unique-key", "doc"]);
    let merging = [
        "--unique-key",
        "doc",
        "--replace-pending",
        "--delay",
        "1h",
        "--debounce",
        "2h",
    ];
    let merged = fixture.json("push", &[&["{\"v\":2}"][..], &merging[..]].concat());
    assert_eq!(
        merged,
        json!({"queue": "default", "id": first["id"], "duplicate": false, "merged": true})
    );
    let task = fixture.json("show", &["1"]);
    assert_eq!(task["payload"], json!({"v": 2}));
    let due_in = task["run_at_unix_ms"].as_i64().unwrap() - now_unix_ms();
    assert!((3_590_000..=3_600_000).contains(&due_in), "{due_in}");
    fixture
        .tq("push", &[&["{\"v\":3}"][..], &merging[..]].concat())
        .assert()
        .success()
        .stdout("merged into task 1 of queue \"default\", which holds the key \"doc\"\n");
    assert_eq!(fixture.ids("pending"), [1]);
}

#[test]
fn push_with_an_expiry_and_a_deadline_shows_them() {
    let fixture = Fixture::new();
    fixture
        .tq("push", &["{}", "--expire-after", "1h", "--deadline", "2h"])
        .assert()
        .success();
    let task = fixture.json("show", &["1"]);
    let expires_in = task["expires_at_unix_ms"].as_i64().unwrap() - now_unix_ms();
    assert!(
        (3_590_000..=3_600_000).contains(&expires_in),
        "{expires_in}"
    );
    let deadline_in = task["deadline_unix_ms"].as_i64().unwrap() - now_unix_ms();
    assert!(
        (7_190_000..=7_200_000).contains(&deadline_in),
        "{deadline_in}"
    );
    fixture
        .tq("show", &["1"])
        .assert()
        .stdout(predicate::str::contains("expires").and(predicate::str::contains("deadline")));
    fixture
        .tq("push", &["{}", "--delay", "1h", "--expire-after", "10m"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("could never run"));
}

#[test]
fn list_pages_and_cuts_rows_to_the_width() {
    let fixture = Fixture::new();
    let long = format!("{{\"text\":\"{}\"}}", "x".repeat(300));
    for _ in 0..5 {
        fixture.tq("push", &[&long]).assert().success();
    }
    let page = fixture.json("list", &["--limit", "2", "--after", "1"]);
    let ids: Vec<i64> = page
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids, [2, 3]);
    fixture
        .tq("list", &["--limit", "2"])
        .assert()
        .stderr("more may follow: add --after 2\n");

    let output = fixture
        .tq("list", &[])
        .env("COLUMNS", "60")
        .output()
        .unwrap();
    let text = String::from_utf8(output.stdout).unwrap();
    assert_eq!(text.lines().count(), 6, "{text}");
    for line in text.lines() {
        assert!(line.chars().count() <= 60, "too wide: {line}");
    }
    assert!(text.lines().nth(1).unwrap().ends_with('…'), "{text}");

    fixture
        .tq("list", &["--state", "dead"])
        .assert()
        .success()
        .stdout("")
        .stderr("no dead tasks in queue \"default\"\n");
    assert_eq!(fixture.json("list", &["--state", "done"]), json!([]));
}

#[test]
fn retry_purge_recover_and_checkpoint() {
    let fixture = Fixture::new();
    fixture.push_numbers(3, "default", &["--max-attempts", "1"]);
    fixture
        .tq("work", &["--until-empty", "--", "sh", "-c", "exit 7"])
        .assert()
        .success();
    assert_eq!(fixture.ids("dead"), [1, 2, 3]);
    let dead = fixture.json("show", &["2"]);
    assert_eq!(dead["state"], "dead");
    assert_eq!(dead["last_error"], "exit status 7");

    fixture
        .tq("retry", &["1"])
        .assert()
        .success()
        .stdout("put back task 1 in queue \"default\"\n");
    let retried = fixture
        .tq("retry", &["2", "1"])
        .arg("--json")
        .assert()
        .code(1);
    assert_eq!(
        serde_json::from_slice::<serde_json::Value>(&retried.get_output().stdout).unwrap(),
        json!({"queue": "default", "retried": [2], "not_dead": [1]})
    );
    fixture
        .tq("retry", &["1"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("no dead task 1"));
    assert_eq!(fixture.ids("pending"), [1, 2]);
    assert_eq!(fixture.json("show", &["1"])["attempts"], 0);

    fixture
        .tq("retry", &["--all-dead"])
        .assert()
        .success()
        .stdout("put back 1 dead task in queue \"default\"\n");
    fixture
        .tq("retry", &["--all-dead"])
        .assert()
        .code(3)
        .stdout("put back 0 dead tasks in queue \"default\"\n");
    let none = fixture
        .tq("retry", &["--all-dead", "--json"])
        .assert()
        .code(3);
    assert_eq!(
        serde_json::from_slice::<serde_json::Value>(&none.get_output().stdout).unwrap(),
        json!({"queue": "default", "retried": 0})
    );

    // Three failures again, then purge: old enough or not.
    fixture
        .tq("work", &["--until-empty", "--", "false"])
        .assert()
        .success();
    assert_eq!(
        fixture.json("purge", &["--dead", "--older-than", "1h"]),
        json!({"queue": "default", "purged": 0})
    );
    fixture
        .tq("purge", &["--dead"])
        .assert()
        .success()
        .stdout("deleted 3 dead tasks in queue \"default\"\n");
    assert_eq!(fixture.json("stats", &[])["queues"], json!([]));

    assert_eq!(
        fixture.json("recover", &[]),
        json!({"recovered": 0, "queues": []})
    );
    fixture
        .tq("recover", &[])
        .assert()
        .success()
        .stdout("took back 0 tasks: the file has no queues\n");
    assert_eq!(
        fixture.json("checkpoint", &[]),
        json!({"wal_bytes": 0, "complete": true})
    );
    fixture
        .tq("checkpoint", &[])
        .assert()
        .success()
        .stdout("write-ahead log copied into the database; now 0 B\n");
}

#[test]
fn a_wait_begun_while_the_task_is_pending_ends_when_a_worker_without_history_finishes_it() {
    let fixture = Fixture::new();
    fixture.push_numbers(1, "default", &[]);
    let waiting = std::process::Command::new(assert_cmd::cargo::cargo_bin("tq"))
        .args(["wait", fixture.file(), "1", "--json", "--timeout", "1m"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Time for the wait to find the task pending.
    std::thread::sleep(std::time::Duration::from_millis(500));
    // Without history the finished task is deleted at once.
    let queue = tq::Queue::open(fixture.file(), &tq::OpenOptions::new()).unwrap();
    let task = queue.pull(&tq::PullOptions::new()).unwrap().unwrap();
    queue.finish(task.receipt()).unwrap();
    let output = waiting.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let shown: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(
        (&shown["id"], &shown["state"], &shown["result"]),
        (&json!(1), &json!("done"), &json!(null))
    );
}

#[test]
fn recover_without_a_queue_takes_back_what_dead_workers_held_in_every_queue() {
    let fixture = Fixture::new();
    fixture.push_numbers(2, "emails", &[]);
    fixture.push_numbers(1, "reports", &[]);
    // Leases that run out at once stand for workers that are gone.
    let mut short = tq::PullOptions::new();
    short.lease(std::time::Duration::from_millis(1)).unwrap();
    for name in ["emails", "reports"] {
        let mut options = tq::OpenOptions::new();
        options.queue(name).unwrap();
        let queue = tq::Queue::open(fixture.file(), &options).unwrap();
        queue.pull(&short).unwrap().unwrap();
    }
    std::thread::sleep(std::time::Duration::from_millis(50));
    fixture
        .tq("recover", &[])
        .assert()
        .success()
        .stdout("took back 1 task in queue \"emails\"\ntook back 1 task in queue \"reports\"\n");
    assert_eq!(fixture.counts("emails")["pending"], 2);
    assert_eq!(fixture.counts("reports")["pending"], 1);
    assert_eq!(
        fixture.json("recover", &[]),
        json!({"recovered": 0, "queues": [
            {"queue": "emails", "recovered": 0},
            {"queue": "reports", "recovered": 0},
        ]})
    );
    fixture
        .tq("recover", &["--queue", "reports"])
        .assert()
        .success()
        .stdout("took back 0 tasks in queue \"reports\"\n");
}

#[test]
fn done_tasks_are_kept_with_history_and_purged_by_age() {
    let fixture = Fixture::new();
    fixture.push_numbers(4, "default", &[]);
    fixture
        .tq("work", &["--until-empty", "--keep-history", "--", "true"])
        .assert()
        .success();
    assert_eq!(fixture.counts("default")["done"], 4);
    assert_eq!(fixture.ids("done"), [1, 2, 3, 4]);
    assert_eq!(
        fixture.json("purge", &["--done-older-than", "1h"]),
        json!({"queue": "default", "purged": 0})
    );
    fixture
        .tq("purge", &["--done-older-than", "0s"])
        .assert()
        .success()
        .stdout("deleted 4 done tasks in queue \"default\"\n");
    assert_eq!(fixture.json("stats", &[])["queues"], json!([]));
}

fn now_unix_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

#[test]
fn cancel_pause_and_resume() {
    let fixture = Fixture::new();
    fixture.push_numbers(3, "default", &[]);
    fixture
        .tq("cancel", &["1", "2", "--reason", "not needed"])
        .assert()
        .success()
        .stdout("cancelled 1, 2 in queue \"default\"\n");
    // Each id that cannot be cancelled is named; the others still are.
    fixture
        .tq("cancel", &["3", "99", "--json"])
        .assert()
        .code(1)
        .stdout(
            "{\"cancel_requested\":[],\"cancelled\":[3],\"queue\":\"default\",\"refused\":[99]}\n",
        )
        .stderr(predicate::str::contains("has no task 99"));
    assert_eq!(fixture.counts("default")["pending"], 0);

    fixture.push_numbers(1, "default", &[]);
    fixture
        .tq("pause", &[])
        .assert()
        .success()
        .stdout("paused queue \"default\" until `tq resume`\n");
    let stats = fixture.counts("default");
    assert_eq!(
        (stats["paused"].clone(), stats["paused_until"].clone()),
        (json!(true), json!(null))
    );
    fixture.tq("stats", &[]).assert().stdout(
        predicate::str::is_match(r"(?m)^default +1 +0 +0 +0 +0 +0 +\S+ +- +until resumed$")
            .unwrap(),
    );
    fixture
        .tq("work", &["--until-empty", "--", "true"])
        .assert()
        .code(3);
    let paused = fixture.json("pause", &["--for", "1h"]);
    assert!(
        paused["paused_until"].as_str().unwrap().ends_with('Z'),
        "{paused}"
    );
    fixture
        .tq("resume", &[])
        .assert()
        .success()
        .stdout("resumed queue \"default\"\n");
    fixture
        .tq("resume", &[])
        .assert()
        .stdout("queue \"default\" was not paused\n");
    fixture
        .tq("limit", &["3"])
        .assert()
        .success()
        .stdout("queue \"default\": at most 3 leased at once\n");
    assert_eq!(fixture.counts("default")["concurrency_limit"], 3);
    fixture
        .tq("limit", &["--rate", "10/1s"])
        .assert()
        .success()
        .stdout("queue \"default\": at most 3 leased at once, 10 claims per 1s\n");
    assert_eq!(
        fixture.counts("default")["rate_limit"],
        json!({"claims": 10, "per_ms": 1000})
    );
    fixture.tq("limit", &["0"]).assert().code(2);
    fixture.tq("limit", &["--rate", "10"]).assert().code(2);
    fixture.tq("limit", &["--none", "3"]).assert().code(2);
    fixture
        .tq("limit", &["--rate", "0/1s"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("1 to 100000"));
    fixture
        .tq("limit", &["--none"])
        .assert()
        .success()
        .stdout("queue \"default\": no limits\n");
    assert_eq!(fixture.counts("default")["concurrency_limit"], json!(null));
    assert_eq!(fixture.counts("default")["rate_limit"], json!(null));
    // A cap on pending tasks (of a queue of its own): shown with its fill,
    // and a push beyond it is refused as full.
    fixture
        .tq("limit", &["--max-pending", "2", "--queue", "capped"])
        .assert()
        .success()
        .stdout("queue \"capped\": 0 of 2 pending (0%)\n");
    fixture.push_numbers(2, "capped", &[]);
    assert_eq!(fixture.counts("capped")["max_pending"], 2);
    fixture
        .tq("push", &["1", "--queue", "capped"])
        .assert()
        .failure()
        .stderr(predicate::str::contains("is full"));
    fixture
        .tq("limit", &["--max-pending", "0", "--queue", "capped"])
        .assert()
        .success()
        .stdout("queue \"capped\": no limits\n");
    fixture
        .tq("limit", &["--none", "--max-pending", "3"])
        .assert()
        .code(2);
    // Without history, cancelled tasks were deleted: none to purge.
    assert_eq!(
        fixture.json("purge", &["--cancelled"]),
        json!({"queue": "default", "purged": 0})
    );
    fixture
        .tq("work", &["--until-empty", "--", "true"])
        .assert()
        .success()
        .stdout("1 done, 0 failed (retried later), 0 dead\n");
}

#[test]
fn fair_keys_and_their_weights() {
    let fixture = Fixture::new();
    fixture.push_numbers(1, "default", &[]);
    fixture
        .tq("weight", &["tenant:7", "--queue", "reports"])
        .assert()
        .success()
        .stdout("queue \"reports\": key \"tenant:7\" has weight 1\n");
    fixture
        .tq("weight", &["tenant:7", "2.5", "--queue", "reports"])
        .assert()
        .success()
        .stdout("queue \"reports\": key \"tenant:7\" has weight 2.5\n");
    assert_eq!(
        fixture.json("weight", &["tenant:7", "--queue", "reports"]),
        json!({"queue": "reports", "key": "tenant:7", "weight": 2.5, "max_pending": null})
    );
    fixture
        .tq("weight", &["tenant:7", "0", "--queue", "reports"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("weight"));
    fixture
        .tq(
            "push",
            &["1", "--queue", "reports", "--fair-key", "tenant:7"],
        )
        .assert()
        .success();
    fixture
        .tq("push", &["1", "--queue", "reports", "--fair-key", ""])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("fairness key"));
    assert_eq!(fixture.counts("reports")["pending"], 1);
}

/// On PostgreSQL, when `TQ_TEST_POSTGRES_URL` names a test server: `tq
/// weight` and `tq push --fair-key` as on a file, in a queue of their own
/// in the default schema.
#[test]
fn fair_keys_and_their_weights_on_postgres() {
    let Ok(url) = std::env::var("TQ_TEST_POSTGRES_URL") else {
        eprintln!("skipped: TQ_TEST_POSTGRES_URL is not set (`make test-postgres` sets it)");
        return;
    };
    let queue = format!("fair-cli-{}", std::process::id());
    let tq = |args: &[&str]| {
        let mut command = Command::cargo_bin("tq").unwrap();
        command.args(args).env_remove("COLUMNS");
        command
    };
    tq(&["weight", &url, "tenant:7", "2.5", "--queue", &queue])
        .assert()
        .success()
        .stdout(format!(
            "queue \"{queue}\": key \"tenant:7\" has weight 2.5\n"
        ));
    tq(&[
        "push",
        &url,
        "1",
        "--queue",
        &queue,
        "--fair-key",
        "tenant:7",
    ])
    .assert()
    .success();
    tq(&["weight", &url, "tenant:7", "--queue", &queue])
        .assert()
        .success()
        .stdout(format!(
            "queue \"{queue}\": key \"tenant:7\" has weight 2.5\n"
        ));
    let mut options = tq::OpenOptions::new();
    options.queue(&queue).unwrap();
    let opened = tq::Queue::open(&url, &options).unwrap();
    let task = opened.pull(&tq::PullOptions::new()).unwrap().unwrap();
    opened.finish(task.receipt()).unwrap();
}

#[test]
fn caps_per_fairness_key() {
    let fixture = Fixture::new();
    fixture.push_numbers(1, "default", &[]);
    fixture
        .tq(
            "limit",
            &["--max-pending-per-key", "1", "--queue", "reports"],
        )
        .assert()
        .success()
        .stdout("queue \"reports\": at most 1 pending per fairness key\n");
    fixture
        .tq(
            "weight",
            &["big", "--max-pending", "2", "--queue", "reports"],
        )
        .assert()
        .success()
        .stdout("queue \"reports\": key \"big\" has weight 1, at most 2 pending\n");
    assert_eq!(
        fixture.json("weight", &["small", "--queue", "reports"]),
        json!({"queue": "reports", "key": "small", "weight": 1.0, "max_pending": 1})
    );
    let push = |key: &str| fixture.tq("push", &["1", "--queue", "reports", "--fair-key", key]);
    push("small").assert().success();
    push("small")
        .assert()
        .failure()
        .stderr(predicate::str::contains("fairness key 'small'"));
    push("big").assert().success();
    push("big").assert().success();
    push("big").assert().failure();
    assert_eq!(fixture.counts("reports")["pending"], 3);
    fixture
        .tq("limit", &["--none", "--queue", "reports"])
        .assert()
        .success()
        .stdout("queue \"reports\": no limits\n");
    push("small").assert().success();
    fixture
        .tq("limit", &["--none", "--max-pending-per-key", "3"])
        .assert()
        .code(2);
}

#[test]
fn show_lists_a_tasks_ended_attempts_as_a_table() {
    let fixture = Fixture::new();
    fixture.push_numbers(1, "emails", &[]);
    let mut options = tq::OpenOptions::new();
    options
        .queue("emails")
        .unwrap()
        .retry_backoff(std::time::Duration::ZERO, std::time::Duration::ZERO)
        .unwrap();
    let queue = tq::Queue::open(fixture.file(), &options).unwrap();
    fixture
        .tq("show", &["1"])
        .assert()
        .success()
        .stdout(predicate::str::contains("attempts\n").not());
    for reason in ["SMTP 421 try later", "SMTP 451 greylisted"] {
        let task = queue.pull(&tq::PullOptions::new()).unwrap().unwrap();
        queue.fail(task.receipt(), reason).unwrap();
    }
    let pid = std::process::id();
    let row = |n: u32, reason: &str| {
        format!("  {n:<3} failed         \\S+Z\\s+.+?\\s+\\d+ \\(pid {pid}\\)\\s+{reason}\n")
    };
    let table = format!(
        "attempts\n  #   outcome        started                   took       holder               reason\n{}{}",
        row(1, "SMTP 421 try later"),
        row(2, "SMTP 451 greylisted")
    );
    fixture
        .tq("show", &["1"])
        .assert()
        .success()
        .stdout(predicate::str::is_match(table).unwrap());
    let shown = fixture.tq("show", &["1", "--json"]).output().unwrap();
    let shown: serde_json::Value = serde_json::from_slice(&shown.stdout).unwrap();
    assert_eq!(shown["attempts"], 2);
    let attempts = &shown["ended_attempts"];
    assert_eq!(attempts[0]["attempt"], 1);
    assert_eq!(attempts[0]["outcome"], "failed");
    assert_eq!(attempts[0]["reason"], "SMTP 421 try later");
    assert_eq!(attempts[1]["reason"], "SMTP 451 greylisted");
    assert_eq!(attempts[1]["holder_pid"], pid);
    assert!(attempts[1]["duration_ms"].as_i64().unwrap() >= 0);
}

#[test]
fn signal_keeps_an_event_or_wakes_the_waiting_task() {
    let fixture = Fixture::new();
    let queue = tq::Queue::open(fixture.file(), &tq::OpenOptions::new()).unwrap();
    fixture
        .tq(
            "signal",
            &["payment:42", "{\"amount\": 10}", "--retention", "1h"],
        )
        .assert()
        .success()
        .stdout("no task waits for \"payment:42\": the event is kept for 3600 s\n");
    fixture
        .tq("signal", &["", "1"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("key"));
    fixture
        .tq("signal", &["payment:42", "{bad"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("JSON"));
    queue.push("1", &tq::PushOptions::new()).unwrap();
    let task = queue.pull(&tq::PullOptions::new()).unwrap().unwrap();
    let long = std::time::Duration::from_secs(600);
    assert_eq!(
        queue
            .wait_for_event(task.receipt(), "payment:42", long)
            .unwrap(),
        tq::Awaited::Event("{\"amount\": 10}".into())
    );
    assert_eq!(
        queue
            .wait_for_event(task.receipt(), "approval", long)
            .unwrap(),
        tq::Awaited::Suspended
    );
    assert_eq!(
        fixture.json("signal", &["approval", "true"]),
        json!({"queue": "default", "key": "approval", "woke": task.id()})
    );
}

#[test]
fn show_and_wait_give_a_tasks_progress_and_result() {
    let fixture = Fixture::new();
    fixture.push_numbers(2, "emails", &[]);
    let mut options = tq::OpenOptions::new();
    options.queue("emails").unwrap();
    let queue = tq::Queue::open(fixture.file(), &options).unwrap();
    let task = queue.pull(&tq::PullOptions::new()).unwrap().unwrap();
    queue
        .extend_with_progress(
            task.receipt(),
            std::time::Duration::from_secs(60),
            "{\"sent\":3}",
        )
        .unwrap();
    fixture
        .tq("show", &["1"])
        .assert()
        .success()
        .stdout(predicate::str::contains("progress\n{\"sent\":3}\n"))
        .stdout(predicate::str::contains("steps").not());
    queue
        .record_step(task.receipt(), "render", "{\"pages\": 3}")
        .unwrap();
    queue.record_step(task.receipt(), "upload", "true").unwrap();
    fixture.tq("show", &["1"]).assert().success().stdout(
        predicate::str::is_match(
            "steps\n  render  .*\n  \\{\"pages\": 3\\}\n  upload  .*\n  true\n",
        )
        .unwrap(),
    );
    let shown = fixture.tq("show", &["1", "--json"]).output().unwrap();
    let shown: serde_json::Value = serde_json::from_slice(&shown.stdout).unwrap();
    assert_eq!(shown["steps"][0]["name"], "render");
    assert_eq!(shown["steps"][0]["output"], json!({"pages": 3}));
    assert_eq!(shown["steps"][1]["name"], "upload");
    assert_eq!(shown["steps"][1]["output"], json!(true));
    fixture
        .tq("wait", &["1", "--timeout", "200ms"])
        .assert()
        .code(3)
        .stderr(predicate::str::contains("task 1 has not ended after 200ms"));

    // A wait begun before the finish shows the result it ends with.
    let waiting = std::process::Command::new(assert_cmd::cargo::cargo_bin("tq"))
        .args(["wait", fixture.file(), "1", "--json"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    queue
        .finish_with_result(task.receipt(), "{\"message_id\": \"m-1\"}")
        .unwrap();
    let output = waiting.wait_with_output().unwrap();
    assert!(output.status.success());
    let shown: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(shown["state"], "done");
    assert_eq!(shown["result"], json!({"message_id": "m-1"}));
    assert_eq!(shown["progress"], json!({"sent": 3}));
    fixture
        .tq("show", &["1"])
        .assert()
        .stdout(predicate::str::ends_with(
            "result\n{\"message_id\": \"m-1\"}\n",
        ));

    // A task that ends dead: shown, and the exit status says so.
    let mut one_attempt = options.clone();
    one_attempt.max_attempts(1).unwrap();
    let queue = tq::Queue::open(fixture.file(), &one_attempt).unwrap();
    queue.cancel_task(2, "").unwrap();
    let third = queue.push("3", &tq::PushOptions::new()).unwrap().id();
    let task = queue.pull(&tq::PullOptions::new()).unwrap().unwrap();
    assert_eq!(task.id(), third);
    queue.fail(task.receipt(), "bounced").unwrap();
    fixture
        .tq("wait", &["3", "--timeout", "10s"])
        .assert()
        .code(1)
        .stdout(predicate::str::contains("last reason\nbounced"))
        .stderr(predicate::str::contains("task 3 ended dead"));
    fixture
        .tq("wait", &["99"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("no task 99"));
}
