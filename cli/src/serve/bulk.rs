//! Actions on many tasks at once: retry or cancel the tasks ticked on a
//! list, or every task of the list's state. A first POST asks for
//! confirmation, saying how many tasks the action will touch; the second
//! carries it out, one transaction per batch of ids
//! ([`tq::Queue::retry_dead_many`], [`tq::Queue::cancel_many`]).

use maud::{html, Markup};
use tq::{Queue, TaskState};

use super::actions::CANCEL_REASON;
use super::answer::local_path;
use super::api::{checked_queue, parse_state};
use super::pages::{encoded, layout};
use super::{Answer, App, Incoming};
use crate::output::state_name;

/// The ids one batch of a state's tasks reads and acts on.
const BATCH: usize = 500;

/// What the form asks for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Action {
    Retry,
    Cancel,
}

impl Action {
    fn parse(incoming: &Incoming) -> Result<Action, Answer> {
        match incoming.form("action") {
            Some("retry") => Ok(Action::Retry),
            Some("cancel") => Ok(Action::Cancel),
            _ => Err(Answer::error(
                400,
                "the form's action must be retry or cancel",
            )),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Action::Retry => "retry",
            Action::Cancel => "cancel",
        }
    }

    /// Whether the action applies to a task in `state`.
    fn applies_to(self, state: TaskState) -> bool {
        match self {
            Action::Retry => state == TaskState::Dead,
            Action::Cancel => matches!(
                state,
                TaskState::Pending | TaskState::Leased | TaskState::Dead
            ),
        }
    }
}

/// The tasks the form names: the ids ticked, or every task in a state.
enum Chosen {
    Ids(Vec<i64>),
    State(TaskState),
}

impl Chosen {
    fn parse(incoming: &Incoming) -> Result<Chosen, Answer> {
        if incoming.form("all").is_some() {
            return Ok(Chosen::State(parse_state(incoming.form("state"))?));
        }
        let ids = incoming
            .form_values("id")
            .map(|id| {
                id.parse::<i64>()
                    .map_err(|_| Answer::error(400, format!("{id:?} is no task id")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        if ids.is_empty() {
            return Err(Answer::error(400, "no task is ticked"));
        }
        Ok(Chosen::Ids(ids))
    }

    /// The hidden fields that name the same tasks again.
    fn fields(&self) -> Markup {
        html! {
            @match self {
                Chosen::Ids(ids) => {
                    @for id in ids { input type="hidden" name="id" value=(id); }
                }
                Chosen::State(state) => {
                    input type="hidden" name="all" value="1";
                    input type="hidden" name="state" value=(state_name(*state));
                }
            }
        }
    }

    /// How many of the tasks `action` would touch now.
    fn count(&self, queue: &Queue, action: Action) -> Result<u64, Answer> {
        Ok(match self {
            Chosen::State(state) if action.applies_to(*state) => queue.count(*state)?,
            Chosen::State(_) => 0,
            Chosen::Ids(ids) => {
                let mut count = 0;
                for id in ids {
                    if queue
                        .task(*id)?
                        .is_some_and(|task| action.applies_to(task.state()))
                    {
                        count += 1;
                    }
                }
                count
            }
        })
    }
}

/// The confirmation page of a bulk action (`POST
/// /queues/{queue}/actions/confirm`): how many tasks it will touch, and
/// the button that carries it out.
pub fn confirm(app: &App, queue: &str, incoming: &Incoming) -> Answer {
    let answer = || -> Result<Answer, Answer> {
        let queue = checked_queue(queue)?;
        let action = Action::parse(incoming)?;
        let chosen = Chosen::parse(incoming)?;
        let count = chosen.count(app.sampler().queue(&queue)?, action)?;
        let next = local_path(incoming.form("next"));
        let tasks = if count == 1 { "task" } else { "tasks" };
        let content = html! {
            h1 { "Confirm" }
            p #confirm-count {
                (action.name()) " " strong { (count) } " " (tasks) " of queue " (queue)
                @if let Chosen::State(state) = chosen { " (every " (state_name(state)) " task)" }
                "?"
            }
            @if count > 0 {
                form.action method="post" action={ "/queues/" (encoded(&queue)) "/actions/bulk" } {
                    input type="hidden" name="csrf" value=(app.csrf);
                    input type="hidden" name="next" value=(next);
                    input type="hidden" name="action" value=(action.name());
                    (chosen.fields())
                    button type="submit" data-action="confirm" { (action.name()) " " (count) " " (tasks) }
                }
            } @else {
                p { "None of them can be " (if action == Action::Retry { "retried" } else { "cancelled" }) "." }
            }
            p { a href=(next) { "Back" } }
        };
        Ok(layout(app, "Confirm", content))
    };
    answer().unwrap_or_else(|refusal| refusal)
}

/// Carries out a confirmed bulk action (`POST
/// /queues/{queue}/actions/bulk`), batch by batch, on `handle`: how many
/// tasks it touched.
pub fn carry_out(handle: &Queue, incoming: &Incoming) -> Result<u64, Answer> {
    let action = Action::parse(incoming)?;
    let act = |ids: &[i64]| -> tq::Result<u64> {
        match action {
            Action::Retry => handle.retry_dead_many(ids),
            Action::Cancel => handle.cancel_many(ids, CANCEL_REASON),
        }
    };
    match Chosen::parse(incoming)? {
        Chosen::Ids(ids) => Ok(act(&ids)?),
        Chosen::State(state) if action.applies_to(state) => {
            // By id, each batch after the last: tasks pushed meanwhile are
            // acted on too, as the count said "every".
            let mut done = 0;
            let mut after = 0;
            loop {
                let page = handle.list(state, after, BATCH)?;
                let Some(last) = page.last() else { break };
                after = last.id();
                let ids: Vec<i64> = page.iter().map(|task| task.id()).collect();
                done += act(&ids)?;
            }
            Ok(done)
        }
        Chosen::State(_) => Ok(0),
    }
}
