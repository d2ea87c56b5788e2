//! The actions the dashboard's forms post (retry, cancel, purge, pause,
//! resume): each writes through a handle of its own, never under the
//! sampler's lock, which only the fresh sample afterwards takes.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tq::{Pause, Queue, TaskState};

use super::answer::local_path;
use super::api::checked_queue;
use super::pages::dead_by_reason;
use super::{Answer, App, Incoming};
use crate::output::{Failure, Location};

/// The reason a cancellation from the dashboard stores.
pub(super) const CANCEL_REASON: &str = "cancelled from the dashboard";

/// The handles actions write through, one per queue, opened on first use.
/// They are apart from the [`crate::sample::Sampler`]'s: a write never
/// waits for a page's read or a sample, and holds neither up.
#[derive(Default)]
pub struct Handles {
    queues: Mutex<BTreeMap<String, Arc<Queue>>>,
}

impl Handles {
    /// The handle on queue `name` of the file at `location`.
    fn queue(&self, location: &Location, name: &str) -> Result<Arc<Queue>, Failure> {
        // A panic while opening leaves the map as it was.
        let mut queues = self
            .queues
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(handle) = queues.get(name) {
            return Ok(handle.clone());
        }
        let handle = Arc::new(location.open(name, |_| Ok(()))?);
        queues.insert(name.to_owned(), handle.clone());
        Ok(handle)
    }
}

/// Carries out a form's action (`POST /queues/{queue}/actions/{name}`),
/// once the request has passed the checks of
/// [`super::auth::post_refusal`], then samples the file for the pages to
/// show its effect.
pub fn act(app: &App, queue: &str, name: &str, incoming: &Incoming) -> Answer {
    let answer = || -> Result<Answer, Answer> {
        let queue = checked_queue(queue)?;
        let handle = app.action_handles.queue(&app.location, &queue)?;
        let skipped = perform(&handle, name, incoming)?;
        app.refresh()?;
        let next = local_path(incoming.form("next"));
        Ok(Answer::Redirect(match skipped {
            Some(skipped) if skipped > 0 => {
                let join = if next.contains('?') { '&' } else { '?' };
                format!("{next}{join}skipped={skipped}")
            }
            _ => next.to_owned(),
        }))
    };
    answer().unwrap_or_else(|refusal| refusal)
}

/// Carries out action `name` on `handle`: for "retry these", how many
/// tasks were skipped, if the group was found.
fn perform(handle: &Queue, name: &str, incoming: &Incoming) -> Result<Option<u64>, Answer> {
    let id = || -> Result<i64, Answer> {
        incoming
            .form("id")
            .and_then(|id| id.parse().ok())
            .ok_or_else(|| Answer::error(400, "the form has no task id"))
    };
    let refused = |err: tq::Error| match err.kind() {
        tq::ErrorKind::InvalidArgument => Answer::error(400, err.to_string()),
        _ => Answer::from(err),
    };
    match name {
        "retry" if incoming.form("all").is_some() => {
            handle.retry_all_dead().map_err(refused)?;
        }
        "retry" if incoming.form("by_reason").is_some() => return retry_group(handle, incoming),
        "retry" => handle.retry_dead(id()?).map_err(refused)?,
        "cancel" => {
            handle.cancel_task(id()?, CANCEL_REASON).map_err(refused)?;
        }
        "purge-dead" => {
            handle
                .purge(TaskState::Dead, Duration::ZERO)
                .map_err(refused)?;
        }
        "bulk" => {
            super::bulk::carry_out(handle, incoming)?;
        }
        "pause" => handle.pause(Pause::UntilResumed).map_err(refused)?,
        "resume" => handle.resume().map_err(refused)?,
        _ => return Err(Answer::error(404, "no such action")),
    }
    Ok(None)
}

/// "Retry these": puts back the dead tasks that share the form's reason,
/// in one transaction per batch (see [`retry_listed`]); how many were
/// skipped, if the group was found.
fn retry_group(handle: &Queue, incoming: &Incoming) -> Result<Option<u64>, Answer> {
    let reason = match (incoming.form("no_reason"), incoming.form_value("reason")) {
        (Some(_), _) => None,
        (None, Some(reason)) => Some(reason),
        (None, None) => return Err(Answer::error(400, "the form names no reason")),
    };
    let (groups, _) = dead_by_reason(handle)?;
    match groups.iter().find(|(group, _)| group.as_deref() == reason) {
        Some((_, ids)) => Ok(Some(retry_listed(handle, ids)?)),
        None => Ok(None),
    }
}

/// Puts `ids` back to pending, up to 500 in one transaction (see
/// [`Queue::retry_dead_many`]), skipping those no longer dead (retried or
/// purged by someone else since they were listed): returns how many were
/// skipped.
fn retry_listed(queue: &Queue, ids: &[i64]) -> tq::Result<u64> {
    let retried = queue.retry_dead_many(ids)?;
    Ok((ids.len() as u64).saturating_sub(retried))
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};
    use std::thread;
    use std::time::{Duration, Instant};

    use tiny_http::Method;
    use tq::{OpenOptions, PullOptions, PushOptions, Queue, TaskState};

    use super::{act, retry_listed, Handles};
    use crate::output::Location;
    use crate::sample::Sampler;
    use crate::serve::metrics::Observations;
    use crate::serve::{Answer, App, History, Incoming};

    /// A queue file with one dead task, and its id.
    fn one_dead_task(file: &str) -> (Queue, i64) {
        let queue = Queue::open(file, &OpenOptions::new()).unwrap();
        let mut once = PushOptions::new();
        once.max_attempts(1).unwrap();
        let id = queue.push("{}", &once).unwrap().id();
        let task = queue.pull(&PullOptions::new()).unwrap().unwrap();
        queue.fail(task.receipt(), "boom").unwrap();
        (queue, id)
    }

    /// A dashboard on the file at `location` that allows actions.
    fn app(location: Location) -> App {
        let mut sampler = Sampler::open(&location, None).unwrap();
        let first = Arc::new(sampler.sample().unwrap());
        App {
            location,
            sampler: Mutex::new(sampler),
            latest: Mutex::new((first, 0)),
            history: Mutex::new(History::default()),
            observations: Observations::default(),
            action_handles: Handles::default(),
            allow_actions: true,
            token: None,
            address: "127.0.0.1:0".parse().unwrap(),
            csrf: "csrf".to_owned(),
        }
    }

    #[test]
    fn an_action_writes_while_a_page_holds_the_sampler() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("jobs.db");
        let file = file.to_str().unwrap();
        let (queue, id) = one_dead_task(file);
        let app = app(Location::parse(file).unwrap());
        let incoming = Incoming {
            method: Method::Post,
            segments: vec![],
            query: vec![],
            form: vec![("id".to_owned(), id.to_string())],
            origin: None,
            fetch_site: None,
            host: None,
            authorization: None,
            cookie: None,
        };
        thread::scope(|scope| {
            // As a page reading a large queue would.
            let held = app.sampler();
            let action = scope.spawn(|| act(&app, tq::DEFAULT_QUEUE, "retry", &incoming));
            let deadline = Instant::now() + Duration::from_secs(30);
            while queue.count(TaskState::Pending).unwrap() == 0 {
                assert!(
                    Instant::now() < deadline,
                    "the retry waited for the sampler's lock"
                );
                thread::sleep(Duration::from_millis(10));
            }
            assert_eq!(queue.count(TaskState::Dead).unwrap(), 0);
            // The fresh sample afterwards is what takes the lock.
            drop(held);
            assert!(matches!(action.join().unwrap(), Answer::Redirect(next) if next == "/"));
        });
    }

    #[test]
    fn retrying_a_group_skips_a_task_that_is_no_longer_dead() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("jobs.db");
        let queue = Queue::open(file.to_str().unwrap(), &OpenOptions::new()).unwrap();
        let mut once = PushOptions::new();
        once.max_attempts(1).unwrap();
        let ids: Vec<i64> = (0..3)
            .map(|n| queue.push(&n.to_string(), &once).unwrap().id())
            .collect();
        for _ in &ids {
            let task = queue.pull(&PullOptions::new()).unwrap().unwrap();
            queue.fail(task.receipt(), "boom").unwrap();
        }
        // Retried by someone else after the group was listed.
        queue.retry_dead(ids[1]).unwrap();
        assert_eq!(retry_listed(&queue, &ids).unwrap(), 1);
        assert_eq!(queue.count(TaskState::Dead).unwrap(), 0);
        assert_eq!(queue.count(TaskState::Pending).unwrap(), 3);
    }
}
