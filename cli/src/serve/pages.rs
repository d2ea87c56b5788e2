//! The dashboard's pages (the action forms they show post to
//! [`super::actions`]).

use std::collections::BTreeMap;
use std::time::Duration;

use maud::{html, Markup, DOCTYPE};
use percent_encoding::{utf8_percent_encode, NON_ALPHANUMERIC};
use tq::{AttemptInfo, Delayed, Lease, Pause, Queue, ScheduleInfo, TaskInfo, TaskState};

use super::api::{self, checked_queue, find_task, find_task_by_key, read_page, Page, STATES};
use super::{delayed, workers, Answer, App, Incoming};
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
pub(super) fn encoded(text: &str) -> String {
    utf8_percent_encode(text, NON_ALPHANUMERIC).to_string()
}

pub(super) fn task_href(queue: &str, id: i64) -> String {
    format!("/tasks/{id}?queue={}", encoded(queue))
}

pub(super) fn layout(app: &App, title: &str, content: Markup) -> Answer {
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
                        span.version { "v" (env!("CARGO_PKG_VERSION")) }
                        (site_nav(app))
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

/// The navigation bar: the overview and every queue of the latest sample.
fn site_nav(app: &App) -> Markup {
    let (sample, _) = app.latest();
    html! {
        nav.site {
            a href="/" { "Queues" }
            @for stats in &sample.queues {
                a.queue href={ "/queues/" (encoded(&stats.queue)) } { (stats.queue) }
            }
            a href="/schedules" { "Schedules" }
            a href="/workers" { "Workers" }
        }
    }
}

/// A state's name in its colour, the same on every page.
fn state_badge(state: TaskState) -> Markup {
    let name = state_name(state);
    html! { span.state data-state=(name) { (name) } }
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
            div.scroll { table #queues {
                thead { tr {
                    th { "queue" }
                    @for state in STATES { th { (state_badge(state)) } } th { "oldest ready" } th { "its age, 30 min" } th { "limit" } th { "cap" } th { "paused" }
                    @if app.allow_actions { th {} }
                } }
                tbody { @for stats in &sample.queues { (overview_row(app, stats)) } }
            } }
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
        let tabs = Tabs::read(app, &queue, schedules.len())?;
        let content = html! {
            (tasks_content(app, &queue, &page, &tabs))
            @if !schedules.is_empty() {
                h2 #schedules { "Schedules" }
                (schedules_table(&schedules.iter().map(|info| (queue.as_str(), info)).collect::<Vec<_>>(), false))
            }
        };
        Ok(layout(
            app,
            &format!("{queue}: {}", state_name(page.state)),
            content,
        ))
    };
    answer().unwrap_or_else(|refusal| refusal)
}

/// Every schedule of the queues that have tasks, by queue.
pub fn schedules(app: &App) -> Answer {
    let answer = || -> Result<Answer, Answer> {
        let (sample, _) = app.latest();
        let mut all = Vec::new();
        {
            let mut sampler = app.sampler();
            for stats in &sample.queues {
                all.push((
                    stats.queue.as_str(),
                    sampler.queue(&stats.queue)?.schedules()?,
                ));
            }
        }
        let rows: Vec<(&str, &ScheduleInfo)> = all
            .iter()
            .flat_map(|(queue, infos)| infos.iter().map(move |info| (*queue, info)))
            .collect();
        let content = html! {
            h1 { "Schedules" }
            @if rows.is_empty() {
                p { "No queue with tasks has a schedule." }
            } @else {
                (schedules_table(&rows, true))
            }
            p.note { "A queue is listed once it holds a task, as on the overview." }
        };
        Ok(layout(app, "Schedules", content))
    };
    answer().unwrap_or_else(|refusal| refusal)
}

/// The form that the boxes ticked on a list of `queue`'s tasks (at path
/// `here`) belong to: retry or cancel them, or (given the list's state and its count) every
/// task in that state; it asks for confirmation first (see
/// [`super::bulk`]).
pub(super) fn bulk_form(
    app: &App,
    queue: &str,
    here: &str,
    every: Option<(TaskState, u64)>,
) -> Markup {
    html! {
        form.bulk #bulk method="post" action={ "/queues/" (encoded(queue)) "/actions/confirm" } {
            input type="hidden" name="csrf" value=(app.csrf);
            input type="hidden" name="next" value=(here);
            @if let Some((state, count)) = every {
                input type="hidden" name="state" value=(state_name(state));
                label { input type="checkbox" name="all" value="1"; " every " (state_name(state)) " task (" (count) "), not only those ticked" }
            }
            button type="submit" name="action" value="retry" data-action="retry selected" { "retry" }
            button type="submit" name="action" value="cancel" data-action="cancel selected" { "cancel" }
        }
    }
}

/// Which of a queue's lists a page shows.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Tab {
    State(TaskState),
    Delayed(Delayed),
}

/// The tabs of a queue's lists, with their counts: its tasks in each state
/// (from the latest sample), its delayed ones (counted now, up to
/// [`delayed::COUNTED`]) and its schedules.
pub(super) struct Tabs {
    states: Vec<(TaskState, u64)>,
    delayed: Vec<(Delayed, u64)>,
    schedules: usize,
}

impl Tabs {
    /// The counts of `queue`'s tabs; it has `schedules` schedules.
    pub(super) fn read(app: &App, queue: &str, schedules: usize) -> Result<Tabs, Answer> {
        let (sample, _) = app.latest();
        let stats = sample.queues.iter().find(|stats| stats.queue == queue);
        let states = STATES
            .into_iter()
            .map(|state| (state, stats.map_or(0, |stats| stats.count(state))))
            .collect();
        let mut sampler = app.sampler();
        let handle = sampler.queue(queue)?;
        let mut delayed = Vec::new();
        for kind in delayed::KINDS {
            delayed.push((kind, handle.count_delayed(kind, delayed::COUNTED)?));
        }
        Ok(Tabs {
            states,
            delayed,
            schedules,
        })
    }

    /// How many tasks the latest sample counted in `state`.
    pub(super) fn count(&self, state: TaskState) -> u64 {
        self.states
            .iter()
            .find(|(counted, _)| *counted == state)
            .map_or(0, |(_, count)| *count)
    }

    /// The tabs, `current` marked, refreshed in place while the page is open.
    pub(super) fn show(&self, queue: &str, current: Tab) -> Markup {
        let href = encoded(queue);
        html! {
            nav.states #live-states data-live {
                @for (state, count) in &self.states {
                    a class=@if current == Tab::State(*state) { "current" } href={ "/queues/" (href) "?state=" (state_name(*state)) } {
                        (state_badge(*state)) " " span.count { (count) }
                    }
                }
                @for (kind, count) in &self.delayed {
                    a class=@if current == Tab::Delayed(*kind) { "current" } href={ "/queues/" (href) "/" (delayed::view_name(*kind)) } {
                        span.view { (delayed::view_name(*kind)) } " " span.count { (delayed::count_text(*count)) }
                    }
                }
                a href={ "/queues/" (href) "/dead" } { "dead by reason" }
                @if self.schedules > 0 {
                    a href={ "/queues/" (href) "#schedules" } { (self.schedules) " schedule" @if self.schedules != 1 { "s" } }
                }
            }
        }
    }
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
fn tasks_content(app: &App, queue: &str, page: &Page, tabs: &Tabs) -> Markup {
    let state_href = format!(
        "/queues/{}?state={}",
        encoded(queue),
        state_name(page.state)
    );
    let href = encoded(queue);
    html! {
        h1 { "Queue " (queue) }
        (tabs.show(queue, Tab::State(page.state)))
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
        @if app.allow_actions {
            (bulk_form(app, queue, &state_href, Some((page.state, tabs.count(page.state)))))
        }
        div #live-tasks data-live {
            (task_table(queue, &page.tasks, app.allow_actions))
            @if let Some(next) = page.next {
                p {
                    a.next href={ (state_href) "&order=" (page.order()) (if page.newest_first { "&before=" } else { "&after=" }) (next) } {
                        "Next page"
                    }
                }
            }
        }
        script src="/assets/live.js" {}
    }
}

/// Schedules with their queues' names, in a table that shows those names
/// if `with_queue` (schedules of several queues).
fn schedules_table(schedules: &[(&str, &ScheduleInfo)], with_queue: bool) -> Markup {
    html! {
        @if !schedules.is_empty() {
            div.scroll { table.schedules {
                thead { tr {
                    @if with_queue { th { "queue" } }
                    th { "name" } th { "when" } th { "catch-up" } th { "next slot" } th { "payload" }
                } }
                tbody {
                    @for (queue, info) in schedules {
                        tr {
                            @if with_queue {
                                td { a href={ "/queues/" (encoded(queue)) "#schedules" } { (queue) } }
                            }
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
            } }
        }
    }
}

pub(super) fn task_table(queue: &str, tasks: &[TaskInfo], selectable: bool) -> Markup {
    html! {
        @if tasks.is_empty() {
            p { "No tasks here." }
        } @else {
            div.scroll { table.tasks {
                thead { tr { @if selectable { th {} } th { "id" } th { "state" } th { "attempts" } th { "run at" } th { "last reason" } th { "payload" } } }
                tbody {
                    @for task in tasks {
                        tr {
                            @if selectable {
                                td { input type="checkbox" name="id" value=(task.id()) form="bulk" aria-label={ "task " (task.id()) }; }
                            }
                            td { a href=(task_href(queue, task.id())) { (task.id()) } }
                            td { (state_badge(task.state())) }
                            td { (task.attempts()) "/" (task.max_attempts()) }
                            td title=(rfc3339(task.run_at_unix_ms())) { (relative_time(task.run_at_unix_ms())) }
                            td.reason { (task.last_error().unwrap_or("")) }
                            td.payload { code { (shorten(task.payload(), PAYLOAD_SHOWN)) } }
                        }
                    }
                }
            } }
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
        let lease = match task.state() {
            TaskState::Leased => workers::lease_of(app, &queue, task.id())?,
            _ => None,
        };
        let content = html! {
            h1 { "Task " (task.id()) }
            div #live-task data-live { (task_content(app, &queue, &task, lease.as_ref())) }
            script src="/assets/live.js" {}
        };
        Ok(layout(app, &format!("task {}", task.id()), content))
    };
    answer().unwrap_or_else(|refusal| refusal)
}

/// A task's ended attempts, oldest first: how each ended, when, for how
/// long, who held it and why.
fn attempts_table(attempts: &[AttemptInfo]) -> Markup {
    html! {
        div.scroll {
            table.attempts {
                thead { tr { th { "#" } th { "outcome" } th { "started" } th { "took" } th { "holder" } th { "reason" } } }
                tbody {
                    @for attempt in attempts {
                        tr {
                            td.attempt-number { (attempt.attempt()) }
                            td.attempt-outcome { (attempt.outcome().as_str()) }
                            td { @if let Some(started) = attempt.started_at_unix_ms() { (rfc3339(started)) " (" (relative_time(started)) ")" } @else { "-" } }
                            td { @if let Some(ms) = attempt.duration_ms() { (humantime::format_duration(Duration::from_millis(ms as u64))) } @else { "-" } }
                            td {
                                @if let Some(holder) = attempt.holder_id() { "holder " (holder) }
                                @if let Some(pid) = attempt.holder_pid() { " (pid " (pid) ")" }
                            }
                            td.attempt-reason { (attempt.reason().unwrap_or("")) }
                        }
                    }
                }
            }
        }
    }
}

/// What a task's page shows of it, refreshed in place while it is open.
fn task_content(app: &App, queue: &str, task: &TaskInfo, lease: Option<&Lease>) -> Markup {
    let payload = pretty(task.payload());
    html! {
        dl.task {
            dt { "queue" } dd { a href={ "/queues/" (encoded(queue)) } { (queue) } }
            dt { "state" } dd #state { (state_badge(task.state())) }
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
            @if let Some(lease) = lease {
                dt { "held by" } dd.holder {
                    a href=(workers::holder_href(lease.holder())) { "holder " (lease.holder().id()) }
                    ": " (workers::describe(lease.holder()))
                }
                dt { "lease expires" } dd.lease { (rfc3339(lease.expires_at_unix_ms())) " (" (relative_time(lease.expires_at_unix_ms())) ")" }
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
                    li { a href=(task_href(queue, *parent)) { "task " (parent) } }
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
        @if !task.ended_attempts().is_empty() {
            h2 { "Attempts" }
            (attempts_table(task.ended_attempts()))
        }
        @if let Some(result) = task.result() {
            h2 { "Result" }
            pre.result { code { (pretty(result)) } }
        }
        (task_actions(app, queue, task))
    }
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
                div.scroll { table.groups {
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
                } }
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
