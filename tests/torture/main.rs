//! Crash, power-loss and concurrency torture tests: child processes push,
//! pull and finish through tq while the driver kills them, stops them,
//! cuts their power or shifts their clocks; each call is logged to a
//! history outside the database, and one checker compares the histories
//! with the final database (see checker.rs, model.rs).
//!
//! Run them with `make test-torture` (they are ignored by a plain
//! `cargo test`, except the checker's own tests). Every scenario prints its
//! seed; `TQ_TORTURE_SEED=N` replays one, `TQ_TORTURE_SECONDS=N` runs each
//! scenario for N seconds (see harness.rs).
//!
//! | scenario | file |
//! |---|---|
//! | 1 producers killed, group commits cut | producers.rs |
//! | 2 workers killed, poison task ending dead, dead holders; churn threads deleting the newest task while failed push_items share their group commit (no id given twice) | workers.rs |
//! | 3 power loss (test-only VFS, vfs.rs), checkpoints included | power_loss.rs |
//! | 4 exclusive delivery on two named queues, with fails, heartbeats and dead tasks; writers not starved past the busy timeout | exclusive.rs |
//! | 5 zombie workers (late extend and finish) and clock jumps | zombies.rs |
//! | 6 many openers | openers.rs |
//! | 7 WAL size under readers, shrink-back, explicit checkpoint | wal.rs |
//! | 8 PostgreSQL only: server restarts, sessions ended, connections cut and stalled by a proxy | network.rs, proxy.rs |
//! | 9 a queue under a concurrency limit, workers killed, late extends of expired leases | limited.rs |
//! | 10 schedules driven by processes killed at random, their clocks stepped | schedules.rs |
//! | 11 a graph of tasks waiting for one another, workers killed, tasks cancelled in their hands | graph.rs |
//! | 12 ordered groups, at most K of each delivered at once, workers killed, tasks cancelled in their hands | groups.rs |
//! | 13 cancellation and the rate limit (declared again by every worker), workers killed | control.rs |
//! | 14 orders pushed and results finished in the application's own transactions (tq's SQL functions), producers and workers killed | outbox.rs |
//! | 15 tasks with expiries and deadlines, producers and workers killed | bounded.rs |
//! | 16 a queue capped on its pending tasks, producers and workers killed; its count watched at every commit | bounded.rs |
//! | the checker's own tests | negative.rs |
//!
//! Scenarios 2, 4, 9, 10, 11, 12, 13, 14 and 15 also run on PostgreSQL (`..._on_postgres`, with
//! `TQ_TEST_POSTGRES_URL` set; `make test-postgres` runs them), each in a
//! schema of its own, the workers being separate clients of the server.
//!
//! Children are this test binary run again with `TQ_TEST_CHILD` naming a
//! role (roles.rs).

mod checker;
mod client;
#[path = "../common/mod.rs"]
mod common;
mod db;
mod harness;
mod history;
mod model;
mod proxy;
mod roles;
mod vfs;

mod bounded;
mod control;
mod exclusive;
mod graph;
mod groups;
mod limited;
mod negative;
mod network;
mod openers;
mod outbox;
mod power_loss;
mod producers;
mod schedules;
mod wal;
mod workers;
mod zombies;

/// In a child, plays the role named by `TQ_TEST_CHILD` and exits; in the
/// parent's run, does nothing.
#[test]
fn child_process() {
    if let Ok(role) = std::env::var("TQ_TEST_CHILD") {
        roles::run(&role);
    }
}
