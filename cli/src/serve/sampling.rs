//! The background samples: every [`SAMPLE_EVERY`], the latest sample, the
//! history of rates the charts show, and the claims and ends the metrics
//! observe.

use std::collections::VecDeque;
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use super::App;
use crate::output::Failure;
use crate::sample::{rates, Rates, Sample, Sampler};

/// How often the background thread samples the file.
pub const SAMPLE_EVERY: Duration = Duration::from_secs(2);
/// How long after a time the background thread waits before it counts the
/// claims and ends stamped with it: a claim is stamped with the time its
/// call began (on PostgreSQL, the server's clock, which may differ from
/// this machine's) and may commit a little later, after a group commit or
/// a turn at the write lock. One stamped and committed further apart is
/// missed, never counted twice.
const SETTLE_MS: i64 = 1000;
/// How many samples' rates the charts show: 30 minutes.
const HISTORY_LEN: usize = 900;

/// What the charts show of one background sample: when it was taken, the
/// rates since the sample before, and each queue's oldest ready age.
pub struct Point {
    pub at_unix_ms: i64,
    pub rates: crate::sample::Rates,
    pub oldest_ready_age_ms: Vec<(String, Option<u64>)>,
}

/// What the background samples add up to.
#[derive(Default)]
pub struct History {
    /// The rates between successive samples, oldest first.
    pub points: VecDeque<Point>,
    /// Tasks pushed, finished and gone dead since the server started, as
    /// derived from the samples (see [`crate::sample::Rates`]).
    pub pushed: u64,
    pub finished: u64,
    pub died: u64,
}

impl History {
    /// Adds the `rates` up to `sample`, the newest point.
    fn add(&mut self, rates: Rates, sample: &Sample) {
        self.pushed += rates.pushed;
        self.finished += rates.finished;
        self.died += rates.died;
        if self.points.len() == HISTORY_LEN {
            self.points.pop_front();
        }
        self.points.push_back(Point {
            at_unix_ms: crate::output::now_unix_ms(),
            rates,
            oldest_ready_age_ms: sample
                .queues
                .iter()
                .map(|stats| (stats.queue.clone(), stats.oldest_ready_age_ms))
                .collect(),
        });
    }
}

/// Samples the file every [`SAMPLE_EVERY`] into the app's latest sample
/// and history, starting from `previous`, and observes the claims and ends
/// stamped from `started_at` on, each window of time once, [`SETTLE_MS`]
/// after its end.
pub(super) fn sample_forever(
    app: &App,
    mut sampler: Sampler,
    mut previous: Arc<Sample>,
    started_at: i64,
) {
    let mut observed_until = started_at;
    loop {
        thread::sleep(SAMPLE_EVERY);
        let sample = match sampler.sample() {
            Ok(sample) => Arc::new(sample),
            Err(Failure::Message(message)) => {
                eprintln!("tq serve: sampling: {message}");
                continue;
            }
            Err(Failure::ClosedOutput) => continue,
        };
        let rates = rates(&previous, &sample);
        app.history().add(rates, &sample);
        observe(app, &sampler, &mut observed_until);
        app.set_latest(sample.clone());
        previous = sample;
    }
}

/// Observes the claims and ends stamped from `observed_until` to
/// [`SETTLE_MS`] ago, and moves `observed_until` past them.
fn observe(app: &App, sampler: &Sampler, observed_until: &mut i64) {
    let until = crate::output::now_unix_ms() - SETTLE_MS;
    if until > *observed_until {
        match sampler.observe(*observed_until, until) {
            Ok(queues) => {
                for (queue, observed) in &queues {
                    app.observations.add(queue, observed);
                }
                *observed_until = until;
            }
            // Tried again, over the same window and more, next time.
            Err(Failure::Message(message)) => {
                eprintln!("tq serve: reading claim and end times: {message}");
            }
            Err(Failure::ClosedOutput) => {}
        }
    }
}
