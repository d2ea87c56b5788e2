//! The dashboard's pages (the action forms they show post to
//! [`super::actions`]).

use std::collections::BTreeMap;
use std::time::Duration;

use maud::{html, Markup, DOCTYPE};
use percent_encoding::{utf8_percent_encode, NON_ALPHANUMERIC};
use tq::{Pause, Queue, ScheduleInfo, TaskInfo, TaskState};

use super::api::{self, checked_queue, find_task, find_task_by_key, read_page, Page, STATES};
use super::{Answer, App, Incoming};
use crate::output::{relative_time, rfc3339, short_duration, state_name};
use crate::sample::QueueStats;
use crate::schedule::{catch_up_text, spec_text};

/// The most dead tasks the dead page reads to group them by reason.
const DEAD_SCAN: usize = 10_000;
/// The ids a reason's group shows as links.
const IDS_SHOWN: usize = 10;
/// The payload's length a task list shows.
const PAYLOAD_SHOWN: usize = 120;

/// A queue name as a path segment or query value.
fn encoded(text: &str) -> String {
    utf8_percent_encode(text, NON_ALPHANUMERIC).to_string()
}

fn task_href(queue: &str, id: i64) -> String {
    format!("/tasks/{id}?queue={}", encoded(queue))
}

fn layout(app: &App, title: &str, content: Markup) -> Answer {
    Answer::html(
        html! {
            (DOCTYPE)
            html lang="en" {
                head {
                    meta charset="utf-8";
                    meta name="viewport" content="width=device-width, initial-scale=1";
                    title { (title) " · tq" }
                    link rel="stylesheet" href="/assets/style.css";
                }
                body {
                    header {
                        a.brand href="/" { "tq" }
                        span.file { (app.location.to_string()) }
                        @if app.allow_actions {
                            span.mode.actions { "actions allowed" }
                        } @else {
                            span.mode.read-only #read-only { "read-only: start with --allow-actions to retry, purge, cancel, pause or resume" }
                        }
                    }
                    main { (content) }
                }
            }
        }
        .into_string(),
    )
}

/// A form that posts one action, with the CSRF token and where to go back.
fn action(app: &App, path: &str, next: &str, label: &str, fields: &[(&str, &str)]) -> Markup {
    html! {
        form.action method="post" action=(path) {
            input type="hidden" name="csrf" value=(app.csrf);
            input type="hidden" name="next" value=(next);
            @for (name, value) in fields {
                input type="hidden" name=(name) value=(value);
            }
            button type="submit" data-action=(label) { (label) }
        }
    }
}

fn age(ms: Option<u64>) -> String {
    ms.map_or("-".to_owned(), |ms| {
        short_duration(Duration::from_millis(ms))
    })
}

fn pause_text(pause: Option<Pause>) -> String {
    match pause {
        None => "-".to_owned(),
        Some(Pause::UntilResumed) => "until resumed".to_owned(),
        Some(Pause::UntilUnixMs(until)) => format!("until {}", rfc3339(until)),
    }
}

/// One queue's row of the overview's table.
fn overview_row(app: &App, stats: &QueueStats) -> Markup {
    let queue = encoded(&stats.queue);
    let cell = |field: &str, value: String| {
        html! { td data-queue=(stats.queue) data-field=(field) { (value) } }
    };
    html! {
        tr data-queue=(stats.queue) {
            td { a href={ "/queues/" (queue) } { (stats.queue) } }
            (cell("pending", stats.pending.to_string()))
            (cell("leased", stats.leased.to_string()))
            td data-queue=(stats.queue) data-field="dead" {
                a href={ "/queues/" (queue) "/dead" } { (stats.dead) }
            }
            (cell("done", stats.done.to_string()))
            (cell("cancelled", stats.cancelled.to_string()))
            (cell("oldest_ready_age", age(stats.oldest_ready_age_ms)))
            td {
                svg.spark data-age-chart=(stats.queue) viewBox="0 0 100 20" preserveAspectRatio="none" {
                    polyline points="" {}
                }
            }
            (cell("concurrency_limit", stats.concurrency_limit.map_or("-".to_owned(), |limit| limit.to_string())))
            (cell("max_pending", stats.fill().map_or("-".to_owned(), |fill| fill.describe())))
            (cell("paused", pause_text(stats.paused)))
            @if app.allow_actions {
                td {
                    @if stats.paused.is_some() {
                        (action(app, &format!("/queues/{queue}/actions/resume"), "/", "resume", &[]))
                    } @else {
                        (action(app, &format!("/queues/{queue}/actions/pause"), "/", "pause", &[]))
                    }
                }
            }
        }
    }
}

/// The overview: every queue's counts, and the throughput charts.
pub fn overview(app: &App) -> Answer {
    let (sample, _) = app.latest();
    let content = html! {
        h1 { "Queues" }
        @if sample.queues.is_empty() {
            p { "No tasks in this file yet." }
        } @else {
            table #queues {
                thead { tr {
                    th { "queue" } th { "pending" } th { "leased" } th { "dead" } th { "done" }
                    th { "cancelled" } th { "oldest ready" } th { "its age, 30 min" } th { "limit" } th { "cap" } th { "paused" }
                    @if app.allow_actions { th {} }
                } }
                tbody { @for stats in &sample.queues { (overview_row(app, stats)) } }
            }
        }
        h2 { "Throughput, whole file (tasks per second, last 30 minutes)" }
        div.charts {
            @for (series, label) in [("pushed", "pushed"), ("finished", "finished"), ("dead", "gone dead")] {
                figure {
                    figcaption { (label) ": " span data-rate=(series) { "-" } "/s" }
                    svg.chart data-chart=(series) viewBox="0 0 300 60" preserveAspectRatio="none" {
                        polyline points="" {}
                    }
                }
            }
        }
        p.note {
            "Rates are derived from samples every 2 s: pushes from the id sequence, finished tasks from those that left the pending, leased and dead counts. "
            "Data: " a href="/api/queues" { "/api/queues" } ", " a href="/metrics" { "/metrics" } "."
        }
        script src="/assets/overview.js" {}
    };
    layout(app, "Queues", content)
}

/// Tasks of a queue in one state, a page at a time; `?id=N` finds task N.
pub fn tasks(app: &App, queue: &str, incoming: &Incoming) -> Answer {
    let answer = || -> Result<Answer, Answer> {
        let queue = checked_queue(queue)?;
        if let Some(found) = search(app, &queue, incoming) {
            return found;
        }
        let page = read_page(app, &queue, incoming)?;
        let schedules = app.sampler().queue(&queue)?.schedules()?;
        let (sample, _) = app.latest();
        let stats = sample.queues.iter().find(|stats| stats.queue == queue);
        let counts: Vec<(TaskState, u64)> = STATES
            .into_iter()
            .map(|state| (state, stats.map_or(0, |stats| stats.count(state))))
            .collect();
        let content = html! {
            (tasks_content(&queue, &page, &counts))
            (schedules_table(&schedules))
        };
        Ok(layout(
            app,
            &format!("{queue}: {}", state_name(page.state)),
            content,
        ))
    };
    answer().unwrap_or_else(|refusal| refusal)
}

/// Where a search of `queue`'s tasks (`?id=N` or `?key=K`) leads, if the
/// query is one.
fn search(app: &App, queue: &str, incoming: &Incoming) -> Option<Result<Answer, Answer>> {
    if let Some(id) = incoming.query("id") {
        let id = id.trim();
        return Some(Ok(Answer::Redirect(format!(
            "/tasks/{}?queue={}",
            encoded(id),
            encoded(queue)
        ))));
    }
    let key = incoming.query("key")?;
    Some(match find_task_by_key(app, queue, key) {
        Ok(Some(task)) => Ok(Answer::Redirect(task_href(queue, task.id()))),
        Ok(None) => Err(Answer::error(
            404,
            format!(
                "no task of queue {queue} has the unique key {:?}",
                key.trim()
            ),
        )),
        Err(refusal) => Err(refusal),
    })
}

/// A page of `queue`'s tasks: the states with their `counts`, the
/// searches, the order, the tasks and the link to the next page.
fn tasks_content(queue: &str, page: &Page, counts: &[(TaskState, u64)]) -> Markup {
    let state_href = format!(
        "/queues/{}?state={}",
        encoded(queue),
        state_name(page.state)
    );
    let href = encoded(queue);
    html! {
        h1 { "Queue " (queue) }
        nav.states {
            @for (state, count) in counts {
                a class=@if *state == page.state { "current" } href={ "/queues/" (href) "?state=" (state_name(*state)) } {
                    (state_name(*state)) " " span.count { (count) }
                }
            }
            a href={ "/queues/" (href) "/dead" } { "dead by reason" }
        }
        form.search method="get" action={ "/queues/" (href) } {
            label { "Task id " input type="search" name="id" inputmode="numeric" required; }
            button type="submit" { "Find" }
        }
        form.search.by-key method="get" action={ "/queues/" (href) } {
            label { "Unique key " input type="search" name="key" required; }
            button type="submit" { "Find" }
        }
        nav.order {
            @if page.newest_first {
                a href=(state_href) { "oldest first" } " · " strong { "newest first" }
            } @else {
                strong { "oldest first" } " · " a href={ (state_href) "&order=newest" } { "newest first" }
            }
        }
        (task_table(queue, &page.tasks))
        @if let Some(next) = page.next {
            p {
                a.next href={ (state_href) "&order=" (page.order()) (if page.newest_first { "&before=" } else { "&after=" }) (next) } {
                    "Next page"
                }
            }
        }
    }
}

/// A queue's schedules, if it has any.
fn schedules_table(schedules: &[ScheduleInfo]) -> Markup {
    html! {
        @if !schedules.is_empty() {
            h2 { "Schedules" }
            table.schedules {
                thead { tr { th { "name" } th { "when" } th { "catch-up" } th { "next slot" } th { "payload" } } }
                tbody {
                    @for info in schedules {
                        tr {
                            td { (info.schedule().name()) }
                            td { (spec_text(info.schedule())) }
                            td { (catch_up_text(info.schedule().catch_up_policy())) }
                            td.next-slot {
                                @if info.paused() { "paused" } @else { (relative_time(info.next_slot_unix_ms())) }
                            }
                            td.payload { code { (shorten(info.schedule().payload(), PAYLOAD_SHOWN)) } }
                        }
                    }
                }
            }
        }
    }
}

fn task_table(queue: &str, tasks: &[TaskInfo]) -> Markup {
    html! {
        @if tasks.is_empty() {
            p { "No tasks here." }
        } @else {
            table.tasks {
                thead { tr { th { "id" } th { "state" } th { "attempts" } th { "run at" } th { "last reason" } th { "payload" } } }
                tbody {
                    @for task in tasks {
                        tr {
                            td { a href=(task_href(queue, task.id())) { (task.id()) } }
                            td { (state_name(task.state())) }
                            td { (task.attempts()) "/" (task.max_attempts()) }
                            td title=(rfc3339(task.run_at_unix_ms())) { (relative_time(task.run_at_unix_ms())) }
                            td.reason { (task.last_error().unwrap_or("")) }
                            td.payload { code { (shorten(task.payload(), PAYLOAD_SHOWN)) } }
                        }
                    }
                }
            }
        }
    }
}

/// `text` cut to at most `chars` characters, with an ellipsis if cut.
fn shorten(text: &str, chars: usize) -> String {
    match text.char_indices().nth(chars) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}

/// A stored JSON text indented for reading (as stored if it does not
/// parse, which only a damaged file gives).
fn pretty(json: &str) -> String {
    serde_json::from_str::<serde_json::Value>(json)
        .and_then(|value| serde_json::to_string_pretty(&value))
        .unwrap_or_else(|_| json.to_owned())
}

/// One task whole, with the actions its state allows.
pub fn task(app: &App, id: &str, incoming: &Incoming) -> Answer {
    let answer = || -> Result<Answer, Answer> {
        let Some((queue, task)) = find_task(app, id, incoming.query("queue"))? else {
            return Err(Answer::error(404, format!("no task {id}")));
        };
        let payload = pretty(task.payload());
        let content = html! {
            h1 { "Task " (task.id()) }
            dl.task {
                dt { "queue" } dd { a href={ "/queues/" (encoded(&queue)) } { (queue) } }
                dt { "state" } dd #state { (state_name(task.state())) }
                dt { "attempts" } dd { (task.attempts()) " of " (task.max_attempts()) }
                dt { "priority" } dd { (task.priority()) }
                dt { "pushed" } dd.pushed { (rfc3339(task.created_at_unix_ms())) " (" (relative_time(task.created_at_unix_ms())) ")" }
                dt { "run at" } dd { (rfc3339(task.run_at_unix_ms())) " (" (relative_time(task.run_at_unix_ms())) ")" }
                @if let Some(expiry) = task.expires_at_unix_ms() {
                    dt { "expires" } dd.expires { (rfc3339(expiry)) " (" (relative_time(expiry)) ")" }
                }
                @if let Some(deadline) = task.deadline_unix_ms() {
                    dt { "deadline" } dd.deadline { (rfc3339(deadline)) " (" (relative_time(deadline)) ")" }
                }
                @if let Some(claimed) = task.claimed_at_unix_ms() {
                    dt { "last claimed" } dd.claimed { (rfc3339(claimed)) " (" (relative_time(claimed)) ")" }
                }
                @if let Some(finished) = task.finished_at_unix_ms() {
                    dt { "ended" } dd.ended { (rfc3339(finished)) " (" (relative_time(finished)) ")" }
                }
            }
            @if let Some(reason) = task.last_error() {
                h2 { "Last reason" }
                pre.reason { (reason) }
            }
            @if !task.waiting_for().is_empty() {
                h2 { "Waits for" }
                ul.waiting-for {
                    @for parent in task.waiting_for() {
                        li { a href=(task_href(&queue, *parent)) { "task " (parent) } }
                    }
                }
            }
            h2 { "Payload" }
            pre.payload { code { (payload) } }
            @if let Some(progress) = task.progress() {
                h2 { "Progress" }
                pre.progress { code { (pretty(progress)) } }
            }
            @if !task.steps().is_empty() {
                h2 { "Steps" }
                ol.steps {
                    @for step in task.steps() {
                        li {
                            span.step-name { (step.name()) }
                            " "
                            span.step-recorded { (rfc3339(step.recorded_at_unix_ms())) " (" (relative_time(step.recorded_at_unix_ms())) ")" }
                            pre.step-output { code { (pretty(step.output())) } }
                        }
                    }
                }
            }
            @if let Some(result) = task.result() {
                h2 { "Result" }
                pre.result { code { (pretty(result)) } }
            }
            (task_actions(app, &queue, &task))
        };
        Ok(layout(app, &format!("task {}", task.id()), content))
    };
    answer().unwrap_or_else(|refusal| refusal)
}

/// The actions a task's state allows, if actions are allowed.
fn task_actions(app: &App, queue: &str, task: &TaskInfo) -> Markup {
    let here = task_href(queue, task.id());
    let base = format!("/queues/{}/actions", encoded(queue));
    let id_text = task.id().to_string();
    html! {
        @if app.allow_actions {
            div.actions {
                @if task.state() == TaskState::Dead {
                    (action(app, &format!("{base}/retry"), &here, "retry", &[("id", &id_text)]))
                }
                @if matches!(task.state(), TaskState::Pending | TaskState::Leased | TaskState::Dead) {
                    (action(app, &format!("{base}/cancel"), &here, "cancel", &[("id", &id_text)]))
                }
            }
        }
    }
}

/// Dead tasks' ids that share a last reason (`None`: died without one).
type ReasonGroup = (Option<String>, Vec<i64>);

/// Up to [`DEAD_SCAN`] dead tasks of a queue, grouped by their last
/// reason (most tasks first), and whether there were more.
pub(super) fn dead_by_reason(queue: &Queue) -> Result<(Vec<ReasonGroup>, bool), Answer> {
    let mut groups: BTreeMap<Option<String>, Vec<i64>> = BTreeMap::new();
    let mut after = 0;
    let mut read = 0;
    loop {
        let page = queue.list(TaskState::Dead, after, api::MAX_PAGE.min(DEAD_SCAN - read))?;
        let Some(last) = page.last() else { break };
        after = last.id();
        read += page.len();
        for task in page {
            groups
                .entry(task.last_error().map(str::to_owned))
                .or_default()
                .push(task.id());
        }
        if read >= DEAD_SCAN {
            break;
        }
    }
    let more = read >= DEAD_SCAN && !queue.list(TaskState::Dead, after, 1)?.is_empty();
    let mut groups: Vec<_> = groups.into_iter().collect();
    groups.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then_with(|| a.0.cmp(&b.0)));
    Ok((groups, more))
}

/// A queue's dead tasks grouped by reason, with retry and purge.
pub fn dead(app: &App, queue: &str, incoming: &Incoming) -> Answer {
    let answer = || -> Result<Answer, Answer> {
        let queue = checked_queue(queue)?;
        let (groups, more) = dead_by_reason(app.sampler().queue(&queue)?)?;
        let skipped = incoming
            .query("skipped")
            .and_then(|skipped| skipped.parse::<u64>().ok());
        let href = encoded(&queue);
        let here = format!("/queues/{href}/dead");
        let base = format!("/queues/{href}/actions");
        let content = html! {
            h1 { "Dead tasks of " a href={ "/queues/" (href) "?state=dead" } { (queue) } }
            @if more {
                p.note { "Showing the first " (DEAD_SCAN) " dead tasks." }
            }
            @if let Some(skipped) = skipped {
                p.note { "Skipped " (skipped) " task" @if skipped != 1 { "s" } " no longer dead (retried or purged meanwhile)." }
            }
            @if groups.is_empty() {
                p { "No dead tasks." }
            } @else {
                @if app.allow_actions {
                    div.actions {
                        (action(app, &format!("{base}/retry"), &here, "retry all", &[("all", "1")]))
                        (action(app, &format!("{base}/purge-dead"), &here, "purge all dead", &[]))
                    }
                }
                table.groups {
                    thead { tr { th { "tasks" } th { "reason" } th { "ids" } @if app.allow_actions { th {} } } }
                    tbody {
                        @for (reason, ids) in &groups {
                            tr {
                                td { (ids.len()) }
                                td.reason { pre { (reason.as_deref().unwrap_or("(no reason)")) } }
                                td {
                                    @for id in ids.iter().take(IDS_SHOWN) {
                                        a href=(task_href(&queue, *id)) { (id) } " "
                                    }
                                    @if ids.len() > IDS_SHOWN { "…" }
                                }
                                @if app.allow_actions {
                                    td { (action(app, &format!("{base}/retry"), &here, "retry these",
                                        &reason_fields(reason.as_deref()))) }
                                }
                            }
                        }
                    }
                }
            }
        };
        Ok(layout(app, &format!("{queue}: dead"), content))
    };
    answer().unwrap_or_else(|refusal| refusal)
}

/// The fields of a "retry these" form: the group's reason, or `no_reason`
/// for the group without one (an empty reason is a group of its own).
fn reason_fields(reason: Option<&str>) -> Vec<(&str, &str)> {
    match reason {
        Some(reason) => vec![("by_reason", "1"), ("reason", reason)],
        None => vec![("by_reason", "1"), ("no_reason", "1")],
    }
}
