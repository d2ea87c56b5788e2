//! `tq serve` over HTTP: the built command on a seeded file, its JSON API,
//! the checks on actions and tokens, and `/metrics` as Prometheus reads it.

mod serving;

use serde_json::Value;
use serving::{Seeded, Served, DEAD_REASON};
use tq::TaskState;

fn agent() -> ureq::Agent {
    ureq::Agent::new_with_config(
        ureq::Agent::config_builder()
            .http_status_as_error(false)
            .max_redirects(0)
            // A server that stopped answering fails the test, not hangs it.
            .timeout_global(Some(std::time::Duration::from_secs(30)))
            .build(),
    )
}

/// GETs `path` with the server's token, if it needs one: its status and
/// body.
fn get(served: &Served, path: &str) -> (u16, String) {
    let mut request = agent().get(served.url(path));
    if let Some(token) = &served.token {
        request = request.header("Authorization", format!("Bearer {token}"));
    }
    let mut response = request.call().unwrap();
    let status = response.status().as_u16();
    (status, response.body_mut().read_to_string().unwrap())
}

/// GETs `path` without any token: its status.
fn get_without_token(served: &Served, path: &str) -> u16 {
    agent()
        .get(served.url(path))
        .call()
        .unwrap()
        .status()
        .as_u16()
}

fn get_json(served: &Served, path: &str) -> Value {
    let (status, body) = get(served, path);
    assert_eq!(status, 200, "GET {path}: {body}");
    serde_json::from_str(&body).unwrap()
}

/// The CSRF token of the action forms on the page at `path`.
fn csrf(served: &Served, path: &str) -> String {
    let (_, page) = get(served, path);
    let marker = "name=\"csrf\" value=\"";
    let start = page
        .find(marker)
        .unwrap_or_else(|| panic!("no action form on {path}"))
        + marker.len();
    page[start..].split('"').next().unwrap().to_owned()
}

/// POSTs a form to `path` as a page of the dashboard itself does.
fn post(served: &Served, path: &str, fields: &[(&str, &str)]) -> (u16, String) {
    post_from(
        served,
        path,
        fields,
        Some(&served.base),
        Some("same-origin"),
    )
}

fn post_from(
    served: &Served,
    path: &str,
    fields: &[(&str, &str)],
    origin: Option<&str>,
    fetch_site: Option<&str>,
) -> (u16, String) {
    let mut request = agent().post(served.url(path));
    if let Some(token) = &served.token {
        request = request.header("Authorization", format!("Bearer {token}"));
    }
    if let Some(origin) = origin {
        request = request.header("Origin", origin);
    }
    if let Some(site) = fetch_site {
        request = request.header("Sec-Fetch-Site", site);
    }
    let mut response = request.send_form(fields.iter().copied()).unwrap();
    let status = response.status().as_u16();
    (status, response.body_mut().read_to_string().unwrap())
}

fn queue_json<'a>(queues: &'a Value, name: &str) -> &'a Value {
    queues["queues"]
        .as_array()
        .unwrap()
        .iter()
        .find(|queue| queue["queue"] == name)
        .unwrap_or_else(|| panic!("no queue {name} in {queues}"))
}

#[test]
fn api_queues_counts_every_queue_by_state() {
    let seeded = Seeded::new();
    let served = Served::start(&seeded.file, &[]);
    let queues = get_json(&served, "/api/queues");
    assert_eq!(queues["read_only"], true);
    assert_eq!(queues["last_id"], 6);
    let emails = queue_json(&queues, "emails");
    assert_eq!(
        (emails["pending"].as_u64(), emails["dead"].as_u64()),
        (Some(3), Some(1))
    );
    assert!(emails["oldest_ready_age_ms"].is_u64());
    assert_eq!(emails["paused"], false);
    let default = queue_json(&queues, "default");
    assert_eq!(
        (default["pending"].as_u64(), default["dead"].as_u64()),
        (Some(2), Some(0))
    );
    assert!(queues["history"]["points"].is_array());
}

#[test]
fn the_history_and_the_counters_follow_pushes_finishes_and_deaths_after_the_start() {
    let seeded = Seeded::new();
    let served = Served::start(&seeded.file, &[]);
    let default = seeded.queue("default");
    let payloads: Vec<String> = (0..5).map(|n| format!("{{\"n\":{n}}}")).collect();
    default
        .push_batch(&payloads, &tq::PushOptions::new())
        .unwrap();
    let task = default.pull(&tq::PullOptions::new()).unwrap().unwrap();
    default.finish(task.receipt()).unwrap();
    // Background samples come every 2 s: wait (boundedly) for one after
    // the changes.
    let mut queues = Value::Null;
    for _ in 0..200 {
        queues = get_json(&served, "/api/queues");
        if queues["history"]["since_start"]["pushed"] == 5 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let history = &queues["history"];
    assert_eq!(history["since_start"]["pushed"], 5, "{queues}");
    assert_eq!(history["since_start"]["finished"], 1, "{queues}");
    assert_eq!(history["since_start"]["dead"], 0, "{queues}");
    let last = history["points"].as_array().unwrap().last().unwrap();
    assert!(last["pushed_per_s"].as_f64().unwrap() > 0.0, "{last}");
    assert!(last["oldest_ready_age_ms"]["emails"].is_u64(), "{last}");
    let (_, metrics) = get(&served, "/metrics");
    assert!(
        metrics.lines().any(|line| line == "tq_pushed_total 5"),
        "{metrics}"
    );
    assert!(
        metrics.lines().any(|line| line == "tq_finished_total 1"),
        "{metrics}"
    );
}

#[test]
fn api_tasks_pages_through_a_state_and_refuses_bad_arguments() {
    let seeded = Seeded::new();
    let served = Served::start(&seeded.file, &[]);
    let ids = |page: &Value| -> Vec<i64> {
        page["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|task| task["id"].as_i64().unwrap())
            .collect()
    };
    let first = get_json(&served, "/api/queues/emails/tasks?state=pending&limit=2");
    assert_eq!(ids(&first), [2, 3]);
    assert_eq!(first["next_after"], 3);
    assert_eq!(first["tasks"][0]["payload"]["to"], "user2@example.com");
    let second = get_json(
        &served,
        "/api/queues/emails/tasks?state=pending&limit=2&after=3",
    );
    assert_eq!(ids(&second), [4]);
    assert_eq!(second["next_after"], Value::Null);
    let dead = get_json(&served, "/api/queues/emails/tasks?state=dead");
    assert_eq!(ids(&dead), [1]);
    let newest = get_json(
        &served,
        "/api/queues/emails/tasks?state=pending&order=newest&limit=2",
    );
    assert_eq!(ids(&newest), [4, 3]);
    assert_eq!(newest["order"], "newest");
    assert_eq!(newest["next_before"], 3);
    assert_eq!(newest["next_after"], Value::Null);
    let older = get_json(
        &served,
        "/api/queues/emails/tasks?state=pending&order=newest&limit=2&before=3",
    );
    assert_eq!(ids(&older), [2]);
    assert_eq!(older["next_before"], Value::Null);
    for bad in [
        "/api/queues/emails/tasks?state=asleep",
        "/api/queues/emails/tasks?limit=0",
        "/api/queues/emails/tasks?limit=1001",
        "/api/queues/emails/tasks?after=-1",
        "/api/queues/emails/tasks?order=sideways",
        "/api/queues/emails/tasks?order=newest&after=3",
        "/api/queues/emails/tasks?before=3",
    ] {
        let (status, body) = get(&served, bad);
        assert_eq!(status, 400, "GET {bad}: {body}");
    }
}

#[test]
fn a_task_is_found_by_its_unique_key_in_the_api_and_the_pages() {
    let seeded = Seeded::new();
    let mut key = tq::PushOptions::new();
    key.unique_key("order/77 ü").unwrap();
    let id = seeded
        .queue("emails")
        .push("{\"to\":\"keyed@example.com\"}", &key)
        .unwrap()
        .id();
    let served = Served::start(&seeded.file, &[]);
    let task = get_json(&served, "/api/queues/emails/keys/order%2F77%20%C3%BC");
    assert_eq!(task["id"], id);
    assert_eq!(task["payload"]["to"], "keyed@example.com");
    assert_eq!(
        get(&served, "/api/queues/default/keys/order%2F77%20%C3%BC").0,
        404
    );
    assert_eq!(get(&served, "/api/queues/emails/keys/other").0, 404);
    // The page's search form sends `key`; the answer leads to the task's
    // page.
    let found = agent()
        .get(served.url("/queues/emails?key=order%2F77+%C3%BC"))
        .call()
        .unwrap();
    assert_eq!(found.status().as_u16(), 303);
    let location = found.headers()["location"].to_str().unwrap().to_owned();
    assert_eq!(location, format!("/tasks/{id}?queue=emails"));
    let (status, page) = get(&served, &location);
    assert_eq!(status, 200, "{page}");
    assert!(page.contains(&format!("Task {id}")), "{page}");
    assert!(page.contains("keyed@example.com"), "{page}");
    let (status, page) = get(&served, "/queues/emails?key=missing");
    assert_eq!(status, 404, "{page}");
    assert!(page.contains("unique key"), "{page}");
}

#[test]
fn api_task_shows_one_task_whole_in_any_queue() {
    let seeded = Seeded::new();
    let served = Served::start(&seeded.file, &[]);
    let task = get_json(&served, "/api/tasks/1");
    assert_eq!(task["queue"], "emails");
    assert_eq!(task["state"], "dead");
    assert_eq!(task["last_error"], DEAD_REASON);
    assert_eq!(task["payload"]["template"], "welcome");
    // Pushed, claimed, then ended dead, in that order.
    let pushed = task["created_at_unix_ms"].as_i64().unwrap();
    let claimed = task["claimed_at_unix_ms"].as_i64().unwrap();
    let ended = task["finished_at_unix_ms"].as_i64().unwrap();
    assert!(pushed <= claimed && claimed <= ended, "{task}");
    let pending = get_json(&served, "/api/tasks/2");
    assert_eq!(pending["claimed_at_unix_ms"], Value::Null);
    assert_eq!(pending["finished_at_unix_ms"], Value::Null);
    let (_, page) = get(&served, "/tasks/1?queue=emails");
    for field in ["pushed", "last claimed", "ended"] {
        assert!(
            page.contains(&format!("<dt>{field}</dt>")),
            "{field}: {page}"
        );
    }
    assert_eq!(
        get_json(&served, "/api/tasks/5?queue=default")["payload"]["n"],
        1
    );
    assert_eq!(get(&served, "/api/tasks/1?queue=default").0, 404);
    assert_eq!(get(&served, "/api/tasks/99").0, 404);
    assert_eq!(get(&served, "/api/tasks/abc").0, 400);
}

#[test]
fn a_tasks_page_and_its_api_list_its_ended_attempts() {
    let seeded = Seeded::new();
    let served = Served::start(&seeded.file, &[]);
    let task = get_json(&served, "/api/tasks/1");
    let attempts = task["ended_attempts"].as_array().expect("attempts listed");
    assert_eq!(attempts.len(), 1, "{task}");
    assert_eq!(attempts[0]["attempt"], 1);
    assert_eq!(attempts[0]["outcome"], "failed");
    assert_eq!(attempts[0]["reason"], DEAD_REASON);
    assert_eq!(
        attempts[0]["started_at_unix_ms"],
        task["claimed_at_unix_ms"]
    );
    let (_, page) = get(&served, "/tasks/1?queue=emails");
    let table = page
        .find("<h2>Attempts</h2>")
        .expect("the attempts are listed");
    let row = &page[table..];
    assert!(
        row.contains("<td class=\"attempt-outcome\">failed</td>"),
        "{page}"
    );
    assert!(row.contains("no such customer"), "{page}");
    assert!(
        row.contains(&format!("(pid {})", std::process::id())),
        "the holder's pid: {page}"
    );
    // A pending task never delivered has none.
    let (_, page) = get(&served, "/tasks/2?queue=emails");
    assert!(!page.contains("<h2>Attempts</h2>"), "{page}");
}

#[test]
fn pages_show_what_a_task_waits_for_its_result_and_the_queues_schedules() {
    let seeded = Seeded::new();
    let queue = seeded.queue("default");
    let first = queue.pull(&tq::PullOptions::new()).unwrap().unwrap();
    let mut after = tq::PushOptions::new();
    after.after(&[first.id()]).unwrap();
    let waiting = queue.push("\"report\"", &after).unwrap().id();
    queue
        .record_step(first.receipt(), "query", "{\"rows\": 12}")
        .unwrap();
    queue
        .record_step(first.receipt(), "render", "\"r.pdf\"")
        .unwrap();
    queue
        .finish_with_result(first.receipt(), "{\"rows\": 12}")
        .unwrap();
    let mut schedule = tq::Schedule::new(
        "nightly",
        tq::ScheduleSpec::Cron("0 2 * * *".to_owned()),
        "{\"report\": \"daily\"}",
    )
    .unwrap();
    schedule.time_zone("Europe/Paris").unwrap();
    queue.add_schedule(&schedule).unwrap();
    let mut after_it = tq::PushOptions::new();
    after_it.after(&[waiting]).unwrap();
    let blocked = queue.push("\"later\"", &after_it).unwrap().id();
    let served = Served::start(&seeded.file, &[]);

    let (status, page) = get(&served, &format!("/tasks/{}", first.id()));
    assert_eq!(status, 200);
    assert!(page.contains("Result"), "{page}");
    assert!(page.contains("&quot;rows&quot;: 12"), "{page}");
    let steps = page.find("<h2>Steps</h2>").expect("the steps are listed");
    let query = page[steps..].find(">query<").expect("step query");
    let render = page[steps..].find(">render<").expect("step render");
    assert!(query < render, "in recording order: {page}");
    assert!(page[steps..].contains("&quot;r.pdf&quot;"), "{page}");
    let shown = get_json(&served, &format!("/api/tasks/{}", first.id()));
    assert_eq!(shown["steps"][0]["name"], "query");
    assert_eq!(shown["steps"][0]["output"]["rows"], 12);
    assert_eq!(shown["steps"][1]["output"], "r.pdf");
    assert!(
        !page.contains("<h2>Attempts</h2>"),
        "a finish records none: {page}"
    );
    let (_, page) = get(&served, &format!("/tasks/{blocked}"));
    assert!(page.contains("Waits for"), "{page}");
    assert!(
        page.contains(&format!("href=\"/tasks/{waiting}?queue=default\"")),
        "{page}"
    );
    let (_, page) = get(&served, "/queues/default");
    assert!(page.contains("Schedules"), "{page}");
    assert!(page.contains("0 2 * * * (Europe/Paris)"), "{page}");
}

#[test]
fn the_schedules_page_lists_every_queues_schedules_and_a_queue_page_leads_to_its_own() {
    let seeded = Seeded::new();
    let nightly = tq::Schedule::new(
        "nightly",
        tq::ScheduleSpec::Cron("0 2 * * *".to_owned()),
        "{\"report\": \"daily\"}",
    )
    .unwrap();
    seeded.queue("default").add_schedule(&nightly).unwrap();
    let digest = tq::Schedule::new(
        "digest",
        tq::ScheduleSpec::Every(std::time::Duration::from_secs(3600)),
        "{\"digest\": true}",
    )
    .unwrap();
    seeded.queue("emails").add_schedule(&digest).unwrap();
    seeded.queue("emails").pause_schedule("digest").unwrap();
    let served = Served::start(&seeded.file, &[]);

    let (status, page) = get(&served, "/schedules");
    assert_eq!(status, 200, "{page}");
    for row in [
        "<td><a href=\"/queues/default#schedules\">default</a></td><td>nightly</td>",
        "<td><a href=\"/queues/emails#schedules\">emails</a></td><td>digest</td>",
    ] {
        assert!(page.contains(row), "{row} not in {page}");
    }
    assert!(page.contains("0 2 * * *"), "{page}");
    assert!(page.contains("paused"), "{page}");
    // Every page leads to it.
    let (_, page) = get(&served, "/queues/default");
    assert!(
        page.contains("<a href=\"/schedules\">Schedules</a>"),
        "{page}"
    );
    // A queue's page says at the top that it has schedules, below its tasks.
    let schedules_link = page
        .find("href=\"/queues/default#schedules\"")
        .expect(&page);
    let tasks = page.find("<table class=\"tasks\"").expect(&page);
    assert!(schedules_link < tasks, "{page}");
    assert!(page.contains("id=\"schedules\""), "{page}");
    let (_, page) = get(&served, "/queues/emails");
    assert!(page.contains("1 schedule</a>"), "{page}");
}

#[test]
fn scheduled_and_retrying_tasks_have_pages_of_their_own_with_counts() {
    let seeded = Seeded::new();
    let mut options = tq::OpenOptions::new();
    options
        .queue("emails")
        .unwrap()
        .retry_backoff(
            std::time::Duration::from_secs(3600),
            std::time::Duration::from_secs(3600),
        )
        .unwrap();
    let emails = tq::Queue::open(&seeded.file, &options).unwrap();
    let mut later = tq::PushOptions::new();
    later.delay(std::time::Duration::from_secs(7200)).unwrap();
    let scheduled: Vec<i64> = (0..51)
        .map(|n| {
            emails
                .push(&format!("{{\"later\": {n}}}"), &later)
                .unwrap()
                .id()
        })
        .collect();
    // Task 2, first in line, fails and waits an hour for its retry.
    let task = emails.pull(&tq::PullOptions::new()).unwrap().unwrap();
    assert_eq!(task.id(), 2);
    emails.fail(task.receipt(), "smtp timeout").unwrap();
    let served = Served::start(&seeded.file, &[]);

    let (status, page) = get(&served, "/queues/emails");
    assert_eq!(status, 200, "{page}");
    assert!(
        page.contains("href=\"/queues/emails/scheduled\"><span class=\"view\">scheduled</span> <span class=\"count\">51</span>"),
        "{page}"
    );
    assert!(
        page.contains("href=\"/queues/emails/retrying\"><span class=\"view\">retrying</span> <span class=\"count\">1</span>"),
        "{page}"
    );
    let (status, page) = get(&served, "/queues/emails/retrying");
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("href=\"/tasks/2?queue=emails\""), "{page}");
    assert!(page.contains("smtp timeout"), "{page}");
    assert!(!page.contains("&quot;later&quot;"), "{page}");
    // 50 a page, soonest first; the next page starts after the last.
    let (_, page) = get(&served, "/queues/emails/scheduled");
    assert!(!page.contains("smtp timeout"), "{page}");
    for id in &scheduled[..50] {
        assert!(
            page.contains(&format!("href=\"/tasks/{id}?queue=emails\"")),
            "{id}: {page}"
        );
    }
    let next = page
        .split("class=\"next\" href=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect(&page)
        .replace("&amp;", "&");
    let (_, page) = get(&served, &next);
    assert!(
        page.contains(&format!("href=\"/tasks/{}?queue=emails\"", scheduled[50])),
        "{page}"
    );
    assert!(
        !page.contains(&format!("href=\"/tasks/{}?queue=emails\"", scheduled[49])),
        "{page}"
    );
    assert_eq!(get(&served, "/queues/emails/scheduled?after=3").0, 400);
}

#[test]
fn the_workers_page_shows_each_holder_with_its_leases_and_a_leased_task_names_its_holder() {
    let seeded = Seeded::new();
    let emails = seeded.queue("emails");
    let mut minute = tq::PullOptions::new();
    minute.lease(std::time::Duration::from_secs(60)).unwrap();
    let held = emails.pull(&minute).unwrap().unwrap();
    let holder = emails.leases(Some(held.id()), 1).unwrap()[0].holder().id();
    let served = Served::start(&seeded.file, &[]);

    let (status, page) = get(&served, "/workers");
    assert_eq!(status, 200, "{page}");
    assert!(page.contains(&format!("id=\"holder-{holder}\"")), "{page}");
    let pid = format!("process <span class=\"pid\">{}</span>", std::process::id());
    assert!(page.contains(&pid), "{page}");
    assert!(
        page.contains(&format!("href=\"/tasks/{}?queue=emails\"", held.id())),
        "{page}"
    );
    assert!(
        page.contains(">in "),
        "the lease expires in the future: {page}"
    );
    let (_, page) = get(&served, &format!("/tasks/{}?queue=emails", held.id()));
    assert!(
        page.contains(&format!("href=\"/workers#holder-{holder}\"")),
        "{page}"
    );
    assert!(page.contains(&pid), "{page}");
    // Once it is finished, nobody holds it.
    emails.finish(held.receipt()).unwrap();
    let (_, page) = get(&served, "/workers");
    assert!(page.contains("No task is leased."), "{page}");
}

#[test]
fn without_allow_actions_the_pages_are_read_only_and_posts_are_refused() {
    let seeded = Seeded::new();
    let served = Served::start(&seeded.file, &[]);
    let (status, page) = get(&served, "/tasks/1?queue=emails");
    assert_eq!(status, 200);
    assert!(page.contains("read-only"), "{page}");
    assert!(
        !page.contains("<form"),
        "an action form on a read-only page: {page}"
    );
    for (path, fields) in [
        ("/queues/emails/actions/retry", vec![("id", "1")]),
        ("/queues/emails/actions/purge-dead", vec![]),
        ("/queues/emails/actions/pause", vec![]),
    ] {
        let (status, body) = post(&served, path, &fields);
        assert_eq!(status, 403, "POST {path}: {body}");
    }
    let emails = seeded.queue("emails");
    assert_eq!(emails.count(TaskState::Dead).unwrap(), 1);
    assert_eq!(emails.paused().unwrap(), None);
}

#[test]
fn bulk_actions_say_how_many_tasks_they_touch_before_they_touch_them() {
    let seeded = Seeded::new();
    let served = Served::start(&seeded.file, &["--allow-actions"]);
    let emails = seeded.queue("emails");
    let (_, page) = get(&served, "/queues/emails");
    for id in 2..=4 {
        let tick = format!("<input type=\"checkbox\" name=\"id\" value=\"{id}\" form=\"bulk\"");
        assert!(page.contains(&tick), "{page}");
    }
    let token = csrf(&served, "/queues/emails");
    let form = |extra: &[(&'static str, &'static str)]| {
        let mut fields = vec![("csrf", token.as_str()), ("next", "/queues/emails")];
        fields.extend_from_slice(extra);
        fields
    };

    // Ticked: two pending tasks, the dead one and an id of no task.
    let ticked = [
        ("action", "cancel"),
        ("id", "1"),
        ("id", "2"),
        ("id", "3"),
        ("id", "999"),
    ];
    let (status, page) = post(&served, "/queues/emails/actions/confirm", &form(&ticked));
    assert_eq!(status, 200, "{page}");
    assert!(
        page.contains("cancel <strong>3</strong> tasks of queue emails?"),
        "{page}"
    );
    assert_eq!(emails.count(TaskState::Pending).unwrap(), 3, "nothing yet");
    let (status, page) = post(
        &served,
        "/queues/emails/actions/confirm",
        &form(&[("action", "retry"), ("all", "1"), ("state", "dead")]),
    );
    assert_eq!(status, 200, "{page}");
    assert!(
        page.contains("retry <strong>1</strong> task of queue emails (every dead task)?"),
        "{page}"
    );
    let (status, page) = post(
        &served,
        "/queues/emails/actions/confirm",
        &form(&[("action", "retry"), ("id", "2")]),
    );
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("None of them can be retried."), "{page}");
    for bad in [
        vec![("action", "delete"), ("id", "2")],
        vec![("action", "cancel")],
        vec![("action", "cancel"), ("id", "two")],
        vec![("action", "cancel"), ("all", "1"), ("state", "gone")],
    ] {
        let (status, page) = post(&served, "/queues/emails/actions/confirm", &form(&bad));
        assert_eq!(status, 400, "{bad:?}: {page}");
        let (status, page) = post(&served, "/queues/emails/actions/bulk", &form(&bad));
        assert_eq!(status, 400, "{bad:?}: {page}");
    }
    assert_eq!(
        emails.count(TaskState::Pending).unwrap(),
        3,
        "bad forms change nothing"
    );

    let (status, _) = post(&served, "/queues/emails/actions/bulk", &form(&ticked));
    assert_eq!(status, 303);
    assert_eq!(emails.count(TaskState::Pending).unwrap(), 1);
    assert_eq!(emails.count(TaskState::Dead).unwrap(), 0);
    let (status, _) = post(
        &served,
        "/queues/emails/actions/bulk",
        &form(&[("action", "cancel"), ("all", "1"), ("state", "pending")]),
    );
    assert_eq!(status, 303);
    assert_eq!(emails.count(TaskState::Pending).unwrap(), 0);
    assert_eq!(
        seeded.queue("default").count(TaskState::Pending).unwrap(),
        2,
        "another queue's"
    );

    // Read-only: no boxes, and the forms are refused.
    let read_only = Served::start(&seeded.file, &[]);
    let (_, page) = get(&read_only, "/queues/default");
    assert!(!page.contains("type=\"checkbox\""), "{page}");
    let (status, _) = post(
        &read_only,
        "/queues/default/actions/confirm",
        &[("action", "cancel"), ("id", "5")],
    );
    assert_eq!(status, 403);
}

#[test]
fn actions_retry_cancel_pause_resume_and_purge_with_allow_actions() {
    let seeded = Seeded::new();
    let served = Served::start(&seeded.file, &["--allow-actions"]);
    let emails = seeded.queue("emails");
    let token = csrf(&served, "/tasks/1?queue=emails");
    let form = |extra: &[(&'static str, &'static str)]| {
        let mut fields = vec![("csrf", token.as_str()), ("next", "/tasks/1?queue=emails")];
        fields.extend_from_slice(extra);
        fields
    };

    let (status, _) = post(
        &served,
        "/queues/emails/actions/retry",
        &form(&[("id", "1")]),
    );
    assert_eq!(status, 303);
    assert_eq!(get_json(&served, "/api/tasks/1")["state"], "pending");
    // Retrying it again is a clear error that changes nothing.
    assert_eq!(
        post(
            &served,
            "/queues/emails/actions/retry",
            &form(&[("id", "1")])
        )
        .0,
        400
    );

    assert_eq!(
        post(
            &served,
            "/queues/emails/actions/cancel",
            &form(&[("id", "2")])
        )
        .0,
        303
    );
    assert_eq!(get(&served, "/api/tasks/2?queue=emails").0, 404);
    assert_eq!(emails.count(TaskState::Pending).unwrap(), 3);

    assert_eq!(
        post(&served, "/queues/emails/actions/pause", &form(&[])).0,
        303
    );
    assert_eq!(
        queue_json(&get_json(&served, "/api/queues"), "emails")["paused"],
        true
    );
    assert_eq!(
        post(&served, "/queues/emails/actions/resume", &form(&[])).0,
        303
    );
    assert_eq!(emails.paused().unwrap(), None);

    let reports = seeded.queue("reports");
    let mut once = tq::PushOptions::new();
    once.max_attempts(1).unwrap();
    reports.push("{}", &once).unwrap();
    let task = reports.pull(&tq::PullOptions::new()).unwrap().unwrap();
    reports.fail(task.receipt(), "boom").unwrap();
    let (status, page) = get(&served, "/queues/reports/dead");
    assert_eq!(status, 200);
    assert!(
        page.contains("boom") && page.contains("purge all dead"),
        "{page}"
    );
    assert_eq!(
        post(&served, "/queues/reports/actions/purge-dead", &form(&[])).0,
        303
    );
    assert_eq!(reports.count(TaskState::Dead).unwrap(), 0);
    assert_eq!(
        emails.count(TaskState::Pending).unwrap(),
        3,
        "a purge of another queue"
    );
}

#[test]
fn retry_by_reason_retries_the_dead_tasks_of_that_reason_only() {
    let seeded = Seeded::new();
    let served = Served::start(&seeded.file, &["--allow-actions"]);
    let emails = seeded.queue("emails");
    let mut once = tq::PushOptions::new();
    once.max_attempts(1).unwrap();
    emails.push("{\"late\":true}", &once).unwrap();
    // Pull every pending task to reach the new one, then hand the rest back.
    let mut held = Vec::new();
    while let Some(task) = emails.pull(&tq::PullOptions::new()).unwrap() {
        held.push(task);
    }
    for task in held {
        if task.id() == 7 {
            emails.fail(task.receipt(), "timeout").unwrap();
        } else {
            emails
                .snooze(task.receipt(), std::time::Duration::ZERO)
                .unwrap();
        }
    }
    let token = csrf(&served, "/queues/emails/dead");
    let fields = [
        ("csrf", token.as_str()),
        ("by_reason", "1"),
        ("reason", "timeout"),
    ];
    assert_eq!(
        post(&served, "/queues/emails/actions/retry", &fields).0,
        303
    );
    assert_eq!(get_json(&served, "/api/tasks/7")["state"], "pending");
    assert_eq!(get_json(&served, "/api/tasks/1")["state"], "dead");
}

/// The hidden fields of the first form in the row of the table on `page`
/// that holds `marker`.
fn row_form(page: &str, marker: &str) -> Vec<(String, String)> {
    let row = page
        .split("<tr>")
        .find(|row| row.contains(marker))
        .unwrap_or_else(|| panic!("no row with {marker}: {page}"));
    let form = row.split("</form>").next().unwrap();
    let attribute = |input: &str, name: &str| -> String {
        let start = input.find(&format!("{name}=\"")).unwrap() + name.len() + 2;
        input[start..].split('"').next().unwrap().to_owned()
    };
    form.split("<input ")
        .skip(1)
        .map(|input| (attribute(input, "name"), attribute(input, "value")))
        .collect()
}

#[test]
fn retry_these_tells_an_empty_reason_from_no_reason() {
    let seeded = Seeded::new();
    let reports = seeded.queue("reports");
    let mut once = tq::PushOptions::new();
    once.max_attempts(1).unwrap();
    let empty = reports.push("\"empty\"", &once).unwrap().id();
    let none = reports.push("\"none\"", &once).unwrap().id();
    for _ in 0..2 {
        let task = reports.pull(&tq::PullOptions::new()).unwrap().unwrap();
        reports.fail(task.receipt(), "").unwrap();
    }
    // tq stores an empty reason as none; an empty one can still be in a
    // file (written by hand, or by an older tq).
    rusqlite::Connection::open(&seeded.file)
        .unwrap()
        .execute("UPDATE tq_tasks SET last_error = '' WHERE id = ?1", [empty])
        .unwrap();
    let served = Served::start(&seeded.file, &["--allow-actions", "--token", "t0ken"]);
    let state = |id: i64| get_json(&served, &format!("/api/tasks/{id}"))["state"].clone();
    let retry_row = |marker: &str| {
        let (_, page) = get(&served, "/queues/reports/dead");
        let fields = row_form(&page, marker);
        let fields: Vec<(&str, &str)> = fields
            .iter()
            .map(|(name, value)| (name.as_str(), value.as_str()))
            .collect();
        let (status, body) = post(&served, "/queues/reports/actions/retry", &fields);
        assert_eq!(status, 303, "{body}");
    };
    retry_row("<pre></pre>");
    assert_eq!(
        (state(empty), state(none)),
        ("pending".into(), "dead".into())
    );
    retry_row("<pre>(no reason)</pre>");
    assert_eq!(state(none), "pending");
    // A retry that met tasks no longer dead comes back saying how many.
    let (_, page) = get(&served, "/queues/reports/dead?skipped=2");
    assert!(page.contains("Skipped 2 tasks no longer dead"), "{page}");
}

#[test]
fn cross_site_posts_and_posts_without_the_csrf_token_are_refused() {
    let seeded = Seeded::new();
    let served = Served::start(&seeded.file, &["--allow-actions"]);
    let token = csrf(&served, "/tasks/1?queue=emails");
    let retry = [("csrf", token.as_str()), ("id", "1")];
    let path = "/queues/emails/actions/retry";
    let attempts = [
        (
            "from another site",
            post_from(
                &served,
                path,
                &retry,
                Some("http://evil.example"),
                Some("cross-site"),
            ),
        ),
        (
            "another origin",
            post_from(&served, path, &retry, Some("http://evil.example"), None),
        ),
        (
            "a sibling site",
            post_from(&served, path, &retry, None, Some("same-site")),
        ),
        ("no CSRF token", post(&served, path, &[("id", "1")])),
        (
            "a wrong CSRF token",
            post(&served, path, &[("csrf", "0123"), ("id", "1")]),
        ),
    ];
    for (what, (status, body)) in attempts {
        assert_eq!(status, 403, "a POST with {what}: {body}");
    }
    assert_eq!(seeded.queue("emails").count(TaskState::Dead).unwrap(), 1);
}

#[test]
fn a_non_loopback_address_requires_the_token_printed_at_start() {
    let seeded = Seeded::new();
    let served = Served::listening(&seeded.file, "0.0.0.0:0", &[]);
    let token = served.token.clone().unwrap();
    assert_eq!(token.len(), 32);
    for path in ["/", "/api/queues", "/metrics", "/tasks/1"] {
        assert_eq!(
            get_without_token(&served, path),
            401,
            "GET {path} without the token"
        );
    }
    let with_bearer = |token: &str| {
        agent()
            .get(served.url("/api/queues"))
            .header("Authorization", format!("Bearer {token}"))
            .call()
            .unwrap()
            .status()
            .as_u16()
    };
    assert_eq!(with_bearer(&token), 200);
    assert_eq!(with_bearer("0123456789abcdef0123456789abcdef"), 401);

    let response = agent()
        .get(served.url(&format!("/?token={token}")))
        .call()
        .unwrap();
    assert_eq!(response.status().as_u16(), 303);
    assert_eq!(response.headers()["location"], "/");
    let cookie = response.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    let cookie = cookie.split(';').next().unwrap().to_owned();
    let status = agent()
        .get(served.url("/api/queues"))
        .header("Cookie", cookie)
        .call()
        .unwrap()
        .status()
        .as_u16();
    assert_eq!(status, 200);
}

#[test]
fn actions_on_loopback_require_a_token_made_up_and_printed_at_start() {
    let seeded = Seeded::new();
    let served = Served::start(&seeded.file, &["--allow-actions"]);
    let token = served.token.clone().unwrap();
    assert_eq!(token.len(), 32);
    assert_eq!(
        served.banner[2],
        format!("open http://127.0.0.1:{}/?token={token}", served.port)
    );
    for path in ["/", "/api/queues", "/tasks/1"] {
        assert_eq!(
            get_without_token(&served, path),
            401,
            "GET {path} without the token"
        );
    }
    // Another local process that read a page's CSRF token still cannot
    // act without the access token.
    let csrf = csrf(&served, "/tasks/1?queue=emails");
    let status = agent()
        .post(served.url("/queues/emails/actions/retry"))
        .header("Origin", &served.base)
        .send_form([("csrf", csrf.as_str()), ("id", "1")])
        .unwrap()
        .status()
        .as_u16();
    assert_eq!(status, 401);
    assert_eq!(seeded.queue("emails").count(TaskState::Dead).unwrap(), 1);
    // Read-only on loopback needs no token, and --help says what that means.
    let read_only = Served::start(&seeded.file, &[]);
    assert_eq!(read_only.token, None);
    assert_eq!(get_without_token(&read_only, "/api/queues"), 200);
    let help = assert_cmd::Command::cargo_bin("tq")
        .unwrap()
        .args(["serve", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8(help.stdout).unwrap();
    assert!(help.contains("any local process"), "{help}");
}

#[test]
fn the_token_cookie_is_named_with_the_port_so_two_dashboards_keep_theirs() {
    let seeded = Seeded::new();
    let first = Served::start(&seeded.file, &["--token", "first-token"]);
    let second = Served::start(&seeded.file, &["--token", "second-token"]);
    let mut cookies = Vec::new();
    for served in [&first, &second] {
        let token = served.token.as_deref().unwrap();
        let response = agent()
            .get(served.url(&format!("/?token={token}")))
            .call()
            .unwrap();
        assert_eq!(response.status().as_u16(), 303);
        let cookie = response.headers()["set-cookie"].to_str().unwrap();
        let pair = cookie.split(';').next().unwrap().to_owned();
        assert_eq!(pair, format!("tq_token_{}={token}", served.port));
        cookies.push(pair);
    }
    // A browser sends both cookies to both ports: each server finds its own.
    let both = cookies.join("; ");
    for served in [&first, &second] {
        let status = agent()
            .get(served.url("/api/queues"))
            .header("Cookie", &both)
            .call()
            .unwrap()
            .status()
            .as_u16();
        assert_eq!(status, 200, "port {}", served.port);
    }
}

#[test]
fn actions_behind_a_tls_proxy_are_accepted_from_the_https_origin_of_the_host() {
    let seeded = Seeded::new();
    let served = Served::start(&seeded.file, &["--allow-actions", "--token", "t0ken"]);
    let token = csrf(&served, "/");
    let fields = [("csrf", token.as_str())];
    let pause = "/queues/emails/actions/pause";
    let https = format!("https://127.0.0.1:{}", served.port);
    let (status, body) = post_from(&served, pause, &fields, Some(&https), Some("same-origin"));
    assert_eq!(status, 303, "{body}");
    assert!(seeded.queue("emails").paused().unwrap().is_some());
    for origin in [
        "https://evil.example".to_owned(),
        format!("https://evil.example:{}", served.port),
        format!("ftp://127.0.0.1:{}", served.port),
    ] {
        let (status, body) = post_from(
            &served,
            "/queues/emails/actions/resume",
            &fields,
            Some(&origin),
            None,
        );
        assert_eq!(status, 403, "Origin {origin}: {body}");
    }
    assert!(seeded.queue("emails").paused().unwrap().is_some());
}

#[test]
fn a_token_given_on_loopback_is_required_too() {
    let seeded = Seeded::new();
    let served = Served::start(&seeded.file, &["--token", "s3cret-token"]);
    assert!(served
        .banner
        .iter()
        .all(|line| !line.contains("s3cret-token")));
    assert_eq!(get_without_token(&served, "/api/queues"), 401);
    let status = agent()
        .get(served.url("/api/queues"))
        .header("Authorization", "Bearer s3cret-token")
        .call()
        .unwrap()
        .status()
        .as_u16();
    assert_eq!(status, 200);
}

#[test]
fn without_a_token_a_request_naming_another_host_is_refused() {
    let seeded = Seeded::new();
    let served = Served::start(&seeded.file, &[]);
    let port = served.base.rsplit(':').next().unwrap().to_owned();
    let status = |host: &str| {
        agent()
            .get(served.url("/api/queues"))
            .header("Host", host)
            .call()
            .unwrap()
            .status()
            .as_u16()
    };
    assert_eq!(status(&format!("evil.example:{port}")), 421);
    assert_eq!(status("localhost:1"), 421);
    assert_eq!(status(&format!("localhost:{port}")), 200);
    assert_eq!(status(&format!("127.0.0.1:{port}")), 200);
}

#[test]
fn an_action_and_the_token_link_redirect_only_to_paths_of_the_dashboard() {
    let seeded = Seeded::new();
    let served = Served::start(&seeded.file, &["--allow-actions", "--token", "t0ken"]);
    let response = agent()
        .get(served.url("//evil.example/?token=t0ken"))
        .call()
        .unwrap();
    assert_eq!(response.status().as_u16(), 303);
    assert_eq!(response.headers()["location"], "/");
    let page = agent()
        .get(served.url("/tasks/1?queue=emails"))
        .header("Authorization", "Bearer t0ken")
        .call()
        .unwrap()
        .body_mut()
        .read_to_string()
        .unwrap();
    let marker = "name=\"csrf\" value=\"";
    let start = page.find(marker).unwrap() + marker.len();
    let csrf = page[start..].split('"').next().unwrap();
    let response = agent()
        .post(served.url("/queues/emails/actions/pause"))
        .header("Authorization", "Bearer t0ken")
        .header("Origin", &served.base)
        .send_form([("csrf", csrf), ("next", "//evil.example/")])
        .unwrap();
    assert_eq!(response.status().as_u16(), 303);
    assert_eq!(response.headers()["location"], "/");
}

#[test]
fn a_next_field_that_is_no_plain_path_redirects_home_and_the_server_keeps_answering() {
    let seeded = Seeded::new();
    let served = Served::start(&seeded.file, &["--allow-actions"]);
    let token = csrf(&served, "/");
    // More than the server's request threads, each a bad next field.
    for next in [
        "/x\r\nSet-Cookie: a=b",
        "/caf\u{e9}",
        "/x y",
        "/\u{7f}",
        "/\\evil",
    ] {
        let (status, _) = post(
            &served,
            "/queues/emails/actions/resume",
            &[("csrf", &token), ("next", next)],
        );
        assert_eq!(status, 303, "next {next:?}");
    }
    let response = agent()
        .post(served.url("/queues/emails/actions/resume"))
        .header("Origin", &served.base)
        .header(
            "Authorization",
            format!("Bearer {}", served.token.as_deref().unwrap()),
        )
        .send_form([("csrf", token.as_str()), ("next", "/x\r\ny")])
        .unwrap();
    assert_eq!(response.headers()["location"], "/");
    assert_eq!(get(&served, "/api/queues").0, 200);
}

#[test]
fn requests_whose_body_never_comes_do_not_stop_the_dashboard() {
    use std::io::Write;
    let seeded = Seeded::new();
    let served = Served::start(&seeded.file, &[]);
    // More than the server's four request threads, each announcing a body
    // the server reads only as it handles the request, and never sending it.
    let heads = [
        "Content-Length: 5000",
        "Content-Length: 10\r\nExpect: 100-continue",
        "Transfer-Encoding: chunked",
    ];
    let held: Vec<std::net::TcpStream> = (0..8)
        .map(|n| {
            let mut stream = std::net::TcpStream::connect(("127.0.0.1", served.port)).unwrap();
            write!(
                stream,
                "POST /queues/default/actions/pause HTTP/1.1\r\nHost: 127.0.0.1:{}\r\n{}\r\n\r\n",
                served.port,
                heads[n % heads.len()]
            )
            .unwrap();
            stream
        })
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let patient = ureq::Agent::new_with_config(
        ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(std::time::Duration::from_secs(5)))
            .build(),
    );
    let status = patient
        .get(served.url("/api/queues"))
        .call()
        .expect("the dashboard stopped answering")
        .status()
        .as_u16();
    assert_eq!(status, 200);
    drop(held);
}

#[test]
fn a_token_that_cannot_go_into_a_cookie_is_refused_at_start() {
    use std::io::{BufRead, BufReader, Read};
    let seeded = Seeded::new();
    for token in ["two words", "semi;colon", "caf\u{e9}"] {
        let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("tq"))
            .args([
                "serve",
                &seeded.file,
                "--listen",
                "127.0.0.1:0",
                "--token",
                token,
            ])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut banner = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut banner)
            .unwrap();
        if !banner.is_empty() {
            let _ = child.kill();
            let _ = child.wait();
            panic!("started with the token {token:?}: {banner}");
        }
        let mut stderr = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut stderr)
            .unwrap();
        assert!(!child.wait().unwrap().success());
        assert!(stderr.contains("--token must be"), "{stderr}");
    }
}

#[test]
fn metrics_parse_as_prometheus_text_with_tasks_by_queue_and_state() {
    let seeded = Seeded::new();
    let served = Served::start(&seeded.file, &[]);
    let (status, body) = get(&served, "/metrics");
    assert_eq!(status, 200);
    let scrape =
        prometheus_parse::Scrape::parse(body.lines().map(|line| Ok(line.to_owned()))).unwrap();
    let value = |metric: &str, labels: &[(&str, &str)]| -> Option<f64> {
        scrape
            .samples
            .iter()
            .find(|sample| {
                sample.metric == metric
                    && labels
                        .iter()
                        .all(|(name, value)| sample.labels.get(name) == Some(*value))
            })
            .map(|sample| match sample.value {
                prometheus_parse::Value::Counter(v)
                | prometheus_parse::Value::Gauge(v)
                | prometheus_parse::Value::Untyped(v) => v,
                _ => panic!("{metric} is not a plain number"),
            })
    };
    let tasks = |queue: &str, state: &str| value("tq_tasks", &[("queue", queue), ("state", state)]);
    assert_eq!(tasks("emails", "pending"), Some(3.0));
    assert_eq!(tasks("emails", "dead"), Some(1.0));
    assert_eq!(tasks("emails", "cancelled"), Some(0.0));
    assert_eq!(tasks("default", "pending"), Some(2.0));
    assert!(
        value("tq_oldest_ready_age_seconds", &[("queue", "emails")]).is_some_and(|age| age >= 0.0)
    );
    assert_eq!(value("tq_paused", &[("queue", "emails")]), Some(0.0));
    assert_eq!(
        value("tq_groups_waiting", &[("queue", "emails")]),
        Some(0.0)
    );
    assert_eq!(value("tq_last_task_id", &[]), Some(6.0));
    for counter in ["tq_pushed_total", "tq_finished_total", "tq_died_total"] {
        assert!(value(counter, &[]).is_some(), "no {counter} in {body}");
    }
}

/// The scrape of `/metrics`, parsed as Prometheus reads it.
fn scrape(served: &Served) -> prometheus_parse::Scrape {
    let (status, body) = get(served, "/metrics");
    assert_eq!(status, 200, "{body}");
    prometheus_parse::Scrape::parse(body.lines().map(|line| Ok(line.to_owned()))).unwrap()
}

/// The value of the sample `metric` of queue `queue` in `scrape`: a plain
/// number, or a histogram's count in its `+Inf` bucket.
fn queue_value(scrape: &prometheus_parse::Scrape, metric: &str, queue: &str) -> Option<f64> {
    scrape
        .samples
        .iter()
        .find(|sample| sample.metric == metric && sample.labels.get("queue") == Some(queue))
        .map(|sample| match &sample.value {
            prometheus_parse::Value::Counter(v)
            | prometheus_parse::Value::Gauge(v)
            | prometheus_parse::Value::Untyped(v) => *v,
            prometheus_parse::Value::Histogram(buckets) => buckets
                .iter()
                .find(|bucket| bucket.less_than.is_infinite())
                .map(|bucket| bucket.count)
                .unwrap(),
            _ => panic!("{metric} is a summary"),
        })
}

#[test]
fn metrics_have_histograms_of_waiting_and_running_times_and_counters_of_claims_and_failures() {
    const SLEPT: f64 = 0.3;
    let seeded = Seeded::new();
    let served = Served::start(&seeded.file, &[]);
    let mut options = tq::OpenOptions::new();
    options.queue("timed").unwrap().keep_history(true);
    let timed = tq::Queue::open(&seeded.file, &options).unwrap();
    // Three tasks run for SLEPT and finish; a fourth dies of its only
    // failure.
    let payloads = ["1", "2", "3"];
    timed
        .push_batch(&payloads, &tq::PushOptions::new())
        .unwrap();
    let mut once = tq::PushOptions::new();
    once.max_attempts(1).unwrap();
    timed.push("4", &once).unwrap();
    let tasks = timed.pull_batch(4, &tq::PullOptions::new()).unwrap();
    assert_eq!(tasks.len(), 4);
    std::thread::sleep(std::time::Duration::from_secs_f64(SLEPT));
    for task in &tasks[..3] {
        timed.finish(task.receipt()).unwrap();
    }
    timed.fail(tasks[3].receipt(), "no").unwrap();

    // The claims and ends are counted by a background sample a second
    // after them (samples come every 2 s): wait, boundedly, for them.
    let mut metrics = scrape(&served);
    for _ in 0..200 {
        if queue_value(&metrics, "tq_run_seconds", "timed") == Some(4.0) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
        metrics = scrape(&served);
    }
    let value = |metric: &str| queue_value(&metrics, metric, "timed");
    assert_eq!(value("tq_wait_seconds"), Some(4.0));
    assert_eq!(value("tq_wait_seconds_count"), Some(4.0));
    assert!(value("tq_wait_seconds_sum").unwrap() < SLEPT);
    assert_eq!(value("tq_run_seconds"), Some(4.0));
    assert_eq!(value("tq_run_seconds_count"), Some(4.0));
    let ran = value("tq_run_seconds_sum").unwrap();
    assert!(ran >= 4.0 * SLEPT, "{ran}");
    assert_eq!(value("tq_claimed_total"), Some(4.0));
    assert_eq!(value("tq_failed_total"), Some(1.0));
    // A queue without claims since the start has its series at 0.
    assert_eq!(
        queue_value(&metrics, "tq_wait_seconds", "emails"),
        Some(0.0)
    );
    assert_eq!(
        queue_value(&metrics, "tq_claimed_total", "emails"),
        Some(0.0)
    );

    // Each is counted once: the next samples add nothing.
    std::thread::sleep(std::time::Duration::from_secs(5));
    let later = scrape(&served);
    for metric in ["tq_wait_seconds", "tq_run_seconds", "tq_claimed_total"] {
        assert_eq!(queue_value(&later, metric, "timed"), Some(4.0), "{metric}");
    }
}

#[test]
fn a_database_password_shows_nowhere_when_the_database_cannot_be_reached() {
    let output = assert_cmd::Command::cargo_bin("tq")
        .unwrap()
        .args([
            "serve",
            "postgres://worker:hunter2-secret@127.0.0.1:1/jobs",
            "--listen",
            "127.0.0.1:0",
        ])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let shown = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(shown.contains("127.0.0.1:1"), "{shown}");
    assert!(!shown.contains("hunter2"), "the password shows: {shown}");
}

#[test]
fn bad_paths_and_queue_names_get_clear_errors() {
    let seeded = Seeded::new();
    let served = Served::start(&seeded.file, &[]);
    assert_eq!(get(&served, "/nowhere").0, 404);
    assert_eq!(get(&served, "/queues/%FF").0, 400);
    let (status, page) = get(&served, "/queues/emails?state=dead");
    assert_eq!(status, 200);
    assert!(page.contains(DEAD_REASON), "{page}");
    let response = agent()
        .get(served.url("/queues/emails?id=3"))
        .call()
        .unwrap();
    assert_eq!(response.status().as_u16(), 303);
    assert_eq!(response.headers()["location"], "/tasks/3?queue=emails");
}
