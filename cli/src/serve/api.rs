//! The JSON API: the data the pages show, for scripts and other dashboards.

use serde_json::{json, Value};
use tq::{TaskInfo, TaskState, DEFAULT_QUEUE};

use super::sampling::SAMPLE_EVERY;
use super::{Answer, App, Incoming};
use crate::output::{parse_queue_name, state_name, task_json, Failure};

/// The most tasks one page lists.
pub const MAX_PAGE: usize = 1000;
/// Tasks per page when the request does not say.
pub const DEFAULT_PAGE: usize = 50;

/// Every task state, in the order the pages show them.
pub const STATES: [TaskState; 5] = [
    TaskState::Pending,
    TaskState::Leased,
    TaskState::Dead,
    TaskState::Done,
    TaskState::Cancelled,
];

/// The state a request names (`pending` when it names none).
pub fn parse_state(name: Option<&str>) -> Result<TaskState, Answer> {
    let name = name.unwrap_or("pending");
    STATES
        .into_iter()
        .find(|state| state_name(*state) == name)
        .ok_or_else(|| {
            Answer::error(
                400,
                format!("no state {name:?}: pending, leased, dead, done or cancelled"),
            )
        })
}

/// A queue name from the path, checked as the command line checks it.
pub fn checked_queue(name: &str) -> Result<String, Answer> {
    parse_queue_name(name).map_err(|err| Answer::error(400, err))
}

/// A page of a queue's tasks as a request asks for it (`state`, `order`,
/// `after` or `before`, `limit`), with where the next page starts when
/// more may follow: the `after` of the next page oldest first, the
/// `before` of the next page newest first.
pub struct Page {
    pub state: TaskState,
    pub newest_first: bool,
    pub tasks: Vec<TaskInfo>,
    pub next: Option<i64>,
}

impl Page {
    /// The page's `order`, as the query names it.
    pub fn order(&self) -> &'static str {
        if self.newest_first {
            "newest"
        } else {
            "oldest"
        }
    }
}

/// Reads the page of `queue`'s tasks that the request's query names.
pub fn read_page(app: &App, queue: &str, incoming: &Incoming) -> Result<Page, Answer> {
    let state = parse_state(incoming.query("state"))?;
    let number = |name: &str| -> Result<Option<i64>, Answer> {
        incoming
            .query(name)
            .map(|text| {
                text.parse::<i64>()
                    .ok()
                    .filter(|value| *value >= 0)
                    .ok_or_else(|| {
                        Answer::error(400, format!("{name} must be a number, 0 or more"))
                    })
            })
            .transpose()
    };
    let limit = number("limit")?.unwrap_or(DEFAULT_PAGE as i64);
    if !(1..=MAX_PAGE as i64).contains(&limit) {
        return Err(Answer::error(
            400,
            format!("limit must be from 1 to {MAX_PAGE}"),
        ));
    }
    let newest_first = match incoming.query("order").unwrap_or("oldest") {
        "oldest" => false,
        "newest" => true,
        _ => return Err(Answer::error(400, "order must be oldest or newest (by id)")),
    };
    let mut sampler = app.sampler();
    let queue = sampler.queue(queue)?;
    let tasks = if newest_first {
        if incoming.query("after").is_some() {
            return Err(Answer::error(
                400,
                "newest first pages start before an id, not after",
            ));
        }
        let before = number("before")?.unwrap_or(i64::MAX);
        queue.list_newest_first(state, before, limit as usize)?
    } else {
        if incoming.query("before").is_some() {
            return Err(Answer::error(
                400,
                "oldest first pages start after an id, not before",
            ));
        }
        queue.list(state, number("after")?.unwrap_or(0), limit as usize)?
    };
    let next = match tasks.last() {
        Some(last) if tasks.len() as i64 == limit => Some(last.id()),
        _ => None,
    };
    Ok(Page {
        state,
        newest_first,
        tasks,
        next,
    })
}

/// The task of `queue` stored under the unique key `key`, if any.
pub fn find_task_by_key(app: &App, queue: &str, key: &str) -> Result<Option<TaskInfo>, Answer> {
    let key = key.trim();
    if key.is_empty() {
        return Err(Answer::error(400, "the unique key to find is empty"));
    }
    Ok(app.sampler().queue(queue)?.task_with_unique_key(key)?)
}

/// The task `id`, and its queue: in `queue` if given, else in any queue of
/// the file.
pub fn find_task(
    app: &App,
    id: &str,
    queue: Option<&str>,
) -> Result<Option<(String, TaskInfo)>, Answer> {
    let id: i64 = id.parse().ok().filter(|id| *id > 0).ok_or_else(|| {
        Answer::error(400, format!("no task id {id:?}: ids are positive numbers"))
    })?;
    let mut sampler = app.sampler();
    let names = match queue {
        Some(queue) => vec![checked_queue(queue)?],
        None => sampler.queue(DEFAULT_QUEUE)?.queue_names()?,
    };
    for name in names {
        if let Some(task) = sampler.queue(&name)?.task(id)? {
            return Ok(Some((name, task)));
        }
    }
    Ok(None)
}

/// The history of rates for the charts, oldest first.
pub fn history_json(app: &App) -> Value {
    let history = app.history();
    json!({
        "interval_s": SAMPLE_EVERY.as_secs_f64(),
        "since_start": {
            "pushed": history.pushed,
            "finished": history.finished,
            "dead": history.died,
        },
        "points": history.points.iter().map(|point| json!({
            "at_unix_ms": point.at_unix_ms,
            "pushed_per_s": point.rates.pushed_per_s,
            "finished_per_s": point.rates.finished_per_s,
            "dead_per_s": point.rates.dead_per_s,
            "oldest_ready_age_ms": point.oldest_ready_age_ms.iter()
                .map(|(queue, age)| (queue.clone(), json!(age)))
                .collect::<serde_json::Map<_, _>>(),
        })).collect::<Vec<_>>(),
    })
}

/// `GET /api/queues`: every queue's counts as of the latest sample, and
/// the throughput history.
pub fn queues(app: &App) -> Answer {
    let (sample, sampled_at) = app.latest();
    Answer::json(&json!({
        "file": app.location.to_string(),
        "sampled_at_unix_ms": sampled_at,
        "read_only": !app.allow_actions,
        "wal_bytes": sample.wal_bytes,
        "last_id": sample.last_id,
        "queues": sample.queues.iter().map(|stats| stats.to_json()).collect::<Vec<_>>(),
        "history": history_json(app),
    }))
}

/// `GET /api/queues/{q}/tasks?state=&order=&after=|before=&limit=`: a
/// page of tasks.
pub fn tasks(app: &App, queue: &str, incoming: &Incoming) -> Answer {
    let answer = || -> Result<Answer, Answer> {
        let queue = checked_queue(queue)?;
        let page = read_page(app, &queue, incoming)?;
        let (next_after, next_before) = match page.newest_first {
            false => (page.next, None),
            true => (None, page.next),
        };
        let tasks = page
            .tasks
            .iter()
            .map(|task| task_json(task, &queue))
            .collect::<Result<Vec<_>, Failure>>()?;
        let head = json!({
            "queue": queue,
            "state": state_name(page.state),
            "order": page.order(),
            "next_after": next_after,
            "next_before": next_before,
        })
        .to_string();
        // The tasks keep their payloads as stored (see `task_json`).
        let head = head.strip_suffix('}').unwrap_or(&head);
        Ok(Answer::Body {
            status: 200,
            content_type: "application/json",
            body: format!("{head},\"tasks\":[{}]}}", tasks.join(",")),
        })
    };
    answer().unwrap_or_else(|refusal| refusal)
}

/// `GET /api/queues/{q}/keys/{key}`: the task stored under a unique key,
/// whole.
pub fn task_by_key(app: &App, queue: &str, key: &str) -> Answer {
    let answer = || -> Result<Answer, Answer> {
        let queue = checked_queue(queue)?;
        match find_task_by_key(app, &queue, key)? {
            Some(task) => Ok(Answer::Body {
                status: 200,
                content_type: "application/json",
                body: task_json(&task, &queue)?,
            }),
            None => Err(Answer::error(
                404,
                format!("no task with the unique key {key:?}"),
            )),
        }
    };
    answer().unwrap_or_else(|refusal| refusal)
}

/// `GET /api/tasks/{id}?queue=`: one task whole.
pub fn task(app: &App, id: &str, incoming: &Incoming) -> Answer {
    match find_task(app, id, incoming.query("queue")) {
        Ok(Some((queue, task))) => match task_json(&task, &queue) {
            Ok(body) => Answer::Body {
                status: 200,
                content_type: "application/json",
                body,
            },
            Err(failure) => failure.into(),
        },
        Ok(None) => Answer::error(404, format!("no task {id}")),
        Err(refusal) => refusal,
    }
}
