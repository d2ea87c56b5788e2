//! The pages of a queue's delayed tasks (pending, not yet due): those
//! scheduled for later and never delivered, and those waiting for a retry,
//! each soonest first (see [`tq::Queue::list_delayed`]).

use maud::html;
use tq::Delayed;

use super::api::{checked_queue, DEFAULT_PAGE};
use super::pages::{bulk_form, encoded, layout, task_table, Tab, Tabs};
use super::{Answer, App, Incoming};

/// The delayed tasks' kinds, in the order of their tabs.
pub const KINDS: [Delayed; 2] = [Delayed::FirstAttempt, Delayed::Retry];

/// The most delayed tasks of a kind that a tab counts: counting reads
/// each task's row, so a large count stops there ("10000+").
pub const COUNTED: u64 = 10_000;

/// The name of a kind's page and tab.
pub fn view_name(kind: Delayed) -> &'static str {
    match kind {
        Delayed::FirstAttempt => "scheduled",
        Delayed::Retry => "retrying",
    }
}

/// A tab's count, which stops at [`COUNTED`].
pub fn count_text(count: u64) -> String {
    if count >= COUNTED {
        format!("{COUNTED}+")
    } else {
        count.to_string()
    }
}

/// Where the request's page starts: just after the task whose run time
/// and id are `after_run_at` and `after` (both or neither).
fn page_start(incoming: &Incoming) -> Result<Option<(i64, i64)>, Answer> {
    let number = |name: &str| -> Result<Option<i64>, Answer> {
        incoming
            .query(name)
            .map(|text| {
                text.parse::<i64>()
                    .map_err(|_| Answer::error(400, format!("{name} must be a number")))
            })
            .transpose()
    };
    match (number("after_run_at")?, number("after")?) {
        (Some(run_at), Some(id)) => Ok(Some((run_at, id))),
        (None, None) => Ok(None),
        _ => Err(Answer::error(
            400,
            "a page of delayed tasks starts after a run time and an id: give both after_run_at and after",
        )),
    }
}

/// A page of `queue`'s delayed tasks of `kind`, soonest first.
pub fn page(app: &App, queue: &str, kind: Delayed, incoming: &Incoming) -> Answer {
    let answer = || -> Result<Answer, Answer> {
        let queue = checked_queue(queue)?;
        let start = page_start(incoming)?;
        let (mut tasks, schedules) = {
            let mut sampler = app.sampler();
            let handle = sampler.queue(&queue)?;
            (
                handle.list_delayed(kind, start, DEFAULT_PAGE + 1)?,
                handle.schedules()?.len(),
            )
        };
        let next = (tasks.len() > DEFAULT_PAGE).then(|| {
            tasks.truncate(DEFAULT_PAGE);
            let last = &tasks[DEFAULT_PAGE - 1];
            (last.run_at_unix_ms(), last.id())
        });
        let tabs = Tabs::read(app, &queue, schedules)?;
        let here = format!("/queues/{}/{}", encoded(&queue), view_name(kind));
        let content = html! {
            h1 { "Queue " (queue) }
            (tabs.show(&queue, Tab::Delayed(kind)))
            p.note {
                @match kind {
                    Delayed::FirstAttempt => "Pending tasks due later, never delivered yet: the soonest first.",
                    Delayed::Retry => "Pending tasks delivered before and due again later (after a failure, a lost lease or a snooze): the soonest first.",
                }
            }
            @if app.allow_actions {
                (bulk_form(app, &queue, &here, None))
            }
            div #live-tasks data-live {
                (task_table(&queue, &tasks, app.allow_actions))
                @if let Some((run_at, id)) = next {
                    p { a.next href={ (here) "?after_run_at=" (run_at) "&after=" (id) } { "Next page" } }
                }
            }
            script src="/assets/live.js" {}
        };
        Ok(layout(
            app,
            &format!("{queue}: {}", view_name(kind)),
            content,
        ))
    };
    answer().unwrap_or_else(|refusal| refusal)
}
