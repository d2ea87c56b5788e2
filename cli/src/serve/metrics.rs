//! `GET /metrics`: the file's state in the OpenMetrics text format, which
//! Prometheus reads. Gauges come from the latest sample; the
//! counters add up what the background samples derived (see
//! [`crate::sample::Rates`]), so they start at 0 with the server and miss
//! what a purge or a retry hides between two samples.

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::{Answer, App};
use crate::output::state_name;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QueueLabels {
    queue: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabels {
    queue: String,
    state: String,
}

/// `GET /metrics`.
pub fn answer(app: &App) -> Answer {
    let (sample, _) = app.latest();
    let mut registry = Registry::with_prefix("tq");

    let tasks = Family::<StateLabels, Gauge>::default();
    let oldest_ready = Family::<QueueLabels, Gauge<f64, AtomicU64>>::default();
    let paused = Family::<QueueLabels, Gauge>::default();
    let limit = Family::<QueueLabels, Gauge>::default();
    let groups_waiting = Family::<QueueLabels, Gauge>::default();
    for stats in &sample.queues {
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
            tasks.get_or_create(&labels).set(count as i64);
        }
        // A queue with nothing ready has no age: its series is left out.
        if let Some(age_ms) = stats.oldest_ready_age_ms {
            oldest_ready
                .get_or_create(&queue())
                .set(age_ms as f64 / 1000.0);
        }
        paused
            .get_or_create(&queue())
            .set(i64::from(stats.paused.is_some()));
        groups_waiting
            .get_or_create(&queue())
            .set(i64::try_from(stats.groups_waiting).unwrap_or(i64::MAX));
        if let Some(concurrency_limit) = stats.concurrency_limit {
            limit
                .get_or_create(&queue())
                .set(i64::from(concurrency_limit));
        }
    }
    registry.register("tasks", "Tasks by queue and state", tasks);
    registry.register(
        "oldest_ready_age_seconds",
        "How long the task ready longest has waited, per queue with a ready task",
        oldest_ready,
    );
    registry.register("paused", "1 while the queue is paused", paused);
    registry.register(
        "groups_waiting",
        "Ordered groups with tasks waiting for their turn",
        groups_waiting,
    );
    registry.register(
        "concurrency_limit",
        "The most tasks leased at once, per queue with a limit",
        limit,
    );

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

    let history = app.history();
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
    drop(history);

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
