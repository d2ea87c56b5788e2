//! `GET /metrics`: the file's state in the OpenMetrics text format, which
//! Prometheus reads. Gauges come from the latest sample; the
//! counters add up what the background samples derived (see
//! [`crate::sample::Rates`]), so they start at 0 with the server and miss
//! what a purge or a retry hides between two samples. The histograms of
//! waiting and running times, and the counters of claims and failures,
//! per queue, add up what the samples read of the stored claim and end
//! times (see [`crate::sample::Observed`]).

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

use super::sampling::History;
use super::{Answer, App};
use crate::output::state_name;
use crate::sample::{Observed, QueueStats, Sample};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QueueLabels {
    queue: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabels {
    queue: String,
    state: String,
}

/// Buckets for the times of jobs: 5 ms to about 87 minutes, doubling.
fn job_times() -> Histogram {
    Histogram::new(exponential_buckets(0.005, 2.0, 21))
}

type Times = Family<QueueLabels, Histogram, fn() -> Histogram>;

/// What the background samples observed of each queue's claims and ends
/// since the server started.
pub struct Observations {
    waited: Times,
    ran: Times,
    claimed: Family<QueueLabels, Counter>,
    failed: Family<QueueLabels, Counter>,
}

impl Default for Observations {
    fn default() -> Observations {
        Observations {
            waited: Family::new_with_constructor(job_times as fn() -> Histogram),
            ran: Family::new_with_constructor(job_times as fn() -> Histogram),
            claimed: Family::default(),
            failed: Family::default(),
        }
    }
}

impl Observations {
    /// Adds what one sample observed of `queue`.
    pub fn add(&self, queue: &str, observed: &Observed) {
        let labels = QueueLabels {
            queue: queue.to_owned(),
        };
        let waited = self.waited.get_or_create(&labels);
        for &seconds in &observed.waited_s {
            waited.observe(seconds);
        }
        let ran = self.ran.get_or_create(&labels);
        for &seconds in &observed.ran_s {
            ran.observe(seconds);
        }
        self.claimed
            .get_or_create(&labels)
            .inc_by(observed.waited_s.len() as u64);
        self.failed.get_or_create(&labels).inc_by(observed.failed);
    }

    fn register(&self, registry: &mut Registry) {
        registry.register(
            "wait_seconds",
            "How long tasks waited for a worker, from when they became due (pushed, or due \
             again after a failure or a snooze) to their claim, per queue, for the claims the \
             samples saw since tq serve started: a task leased at a sample, or done or dead \
             and kept then",
            self.waited.clone(),
        );
        registry.register(
            "run_seconds",
            "How long the last delivery of tasks ran, from its claim to the task's end, per \
             queue, for the tasks the samples saw end done or dead since tq serve started \
             (kept rows only: a task finished without history is not seen)",
            self.ran.clone(),
        );
        registry.register(
            "claimed",
            "Claims of tasks since tq serve started, per queue, as the samples saw them (the \
             count of tq_wait_seconds); a delivery that went back to pending before the next \
             sample is not seen",
            self.claimed.clone(),
        );
        registry.register(
            "failed",
            "Deliveries that ended without finishing (failed, lease ran out, holder gone) since \
             tq serve started, per queue, as the samples saw them: one for each claim seen of \
             a second or later attempt, and one for each death seen",
            self.failed.clone(),
        );
    }
}

/// The gauges of each queue's state in the latest sample.
#[derive(Default)]
struct QueueGauges {
    tasks: Family<StateLabels, Gauge>,
    oldest_ready: Family<QueueLabels, Gauge<f64, AtomicU64>>,
    paused: Family<QueueLabels, Gauge>,
    limit: Family<QueueLabels, Gauge>,
    groups_waiting: Family<QueueLabels, Gauge>,
}

impl QueueGauges {
    /// Sets the gauges of the queue that `stats` describe.
    fn set(&self, stats: &QueueStats) {
        let queue = || QueueLabels {
            queue: stats.queue.clone(),
        };
        for (state, count) in [
            (tq::TaskState::Pending, stats.pending),
            (tq::TaskState::Leased, stats.leased),
            (tq::TaskState::Dead, stats.dead),
            (tq::TaskState::Done, stats.done),
            (tq::TaskState::Cancelled, stats.cancelled),
        ] {
            let labels = StateLabels {
                queue: stats.queue.clone(),
                state: state_name(state).to_owned(),
            };
            self.tasks.get_or_create(&labels).set(count as i64);
        }
        // A queue with nothing ready has no age: its series is left out.
        if let Some(age_ms) = stats.oldest_ready_age_ms {
            self.oldest_ready
                .get_or_create(&queue())
                .set(age_ms as f64 / 1000.0);
        }
        self.paused
            .get_or_create(&queue())
            .set(i64::from(stats.paused.is_some()));
        self.groups_waiting
            .get_or_create(&queue())
            .set(i64::try_from(stats.groups_waiting).unwrap_or(i64::MAX));
        if let Some(concurrency_limit) = stats.concurrency_limit {
            self.limit
                .get_or_create(&queue())
                .set(i64::from(concurrency_limit));
        }
    }

    fn register(self, registry: &mut Registry) {
        registry.register("tasks", "Tasks by queue and state", self.tasks);
        registry.register(
            "oldest_ready_age_seconds",
            "How long the task ready longest has waited, per queue with a ready task",
            self.oldest_ready,
        );
        registry.register("paused", "1 while the queue is paused", self.paused);
        registry.register(
            "groups_waiting",
            "Ordered groups with tasks waiting for their turn",
            self.groups_waiting,
        );
        registry.register(
            "concurrency_limit",
            "The most tasks leased at once, per queue with a limit",
            self.limit,
        );
    }
}

/// `GET /metrics`.
pub fn answer(app: &App) -> Answer {
    let (sample, _) = app.latest();
    let mut registry = Registry::with_prefix("tq");

    let gauges = QueueGauges::default();
    for stats in &sample.queues {
        gauges.set(stats);
        // Every sampled queue has its series, at 0 before any observation.
        app.observations.add(&stats.queue, &Observed::default());
    }
    gauges.register(&mut registry);
    register_file(&mut registry, &sample);
    register_totals(&mut registry, &app.history());
    app.observations.register(&mut registry);

    let mut body = String::new();
    if let Err(err) = encode(&mut body, &registry) {
        return Answer::error(500, format!("encoding the metrics: {err}"));
    }
    Answer::Body {
        status: 200,
        content_type: "application/openmetrics-text; version=1.0.0; charset=utf-8",
        body,
    }
}

/// The gauges of the whole file: the last task id, and the size of the
/// write-ahead log where there is one.
fn register_file(registry: &mut Registry, sample: &Sample) {
    let last_id = Gauge::<i64>::default();
    last_id.set(sample.last_id);
    registry.register(
        "last_task_id",
        "The highest task id handed out, in any queue",
        last_id,
    );
    if let Some(wal_bytes) = sample.wal_bytes {
        let wal = Gauge::<i64>::default();
        wal.set(i64::try_from(wal_bytes).unwrap_or(i64::MAX));
        registry.register("wal_bytes", "The size of the write-ahead log", wal);
    }
}

/// The counters the samples derived since the server started.
fn register_totals(registry: &mut Registry, history: &History) {
    for (name, help, total) in [
        ("pushed", "Tasks pushed since tq serve started, derived from samples", history.pushed),
        (
            "finished",
            "Tasks that left the pending, leased and dead states since tq serve started, derived from samples",
            history.finished,
        ),
        ("died", "Tasks gone dead since tq serve started, derived from samples", history.died),
    ] {
        let counter = Counter::<u64>::default();
        counter.inc_by(total);
        registry.register(name, help, counter);
    }
}
