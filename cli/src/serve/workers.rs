//! The workers page: every holder of leased tasks that the store records
//! (see [`tq::Queue::leases`]), with the tasks it holds and their leases;
//! and the holder a leased task's page names.

use std::collections::BTreeMap;

use maud::{html, Markup};
use tq::{Holder, Lease};

use super::pages::{layout, task_href};
use super::{Answer, App};
use crate::output::{relative_time, rfc3339};

/// The most leases the page reads of each queue.
const LEASES_READ: usize = 1000;

/// How many characters of a boot id the page shows: enough to tell the
/// machines of a file apart.
const BOOT_SHOWN: usize = 8;

/// A holder and the leases it holds, each with its queue's name.
type HeldBy<'a> = (Holder, Vec<(&'a str, Lease)>);

/// Where a holder is on the workers page.
pub fn holder_href(holder: &Holder) -> String {
    format!("/workers#holder-{}", holder.id())
}

/// What the store records of who `holder` is.
pub fn describe(holder: &Holder) -> Markup {
    html! {
        @if let Some(pid) = holder.pid() {
            "process " span.pid { (pid) }
            @if let Some(boot) = holder.boot_id().filter(|boot| !boot.is_empty()) {
                " on the machine booted as " code title=(boot) { (boot.chars().take(BOOT_SHOWN).collect::<String>()) }
            }
        } @else {
            "a connection to the server"
            @if let Some(seen) = holder.seen_alive_at_unix_ms() {
                ", last seen alive " span title=(rfc3339(seen)) { (relative_time(seen)) }
            }
        }
    }
}

/// Every queue's leases, by holder.
pub fn page(app: &App) -> Answer {
    let answer = || -> Result<Answer, Answer> {
        let (sample, _) = app.latest();
        let mut holders: BTreeMap<i64, HeldBy> = BTreeMap::new();
        {
            let mut sampler = app.sampler();
            for stats in &sample.queues {
                for lease in sampler.queue(&stats.queue)?.leases(None, LEASES_READ)? {
                    let entry = holders
                        .entry(lease.holder().id())
                        .or_insert_with(|| (lease.holder().clone(), Vec::new()));
                    entry.1.push((stats.queue.as_str(), lease));
                }
            }
        }
        let content = html! {
            h1 { "Workers" }
            p.note { "The processes holding leased tasks, as the store records them. A holder whose leases have run out is listed until its tasks are claimed again or recovered." }
            div #live-workers data-live {
                @if holders.is_empty() {
                    p { "No task is leased." }
                }
                @for (id, (holder, leases)) in &holders {
                    section.holder #{ "holder-" (id) } {
                        h2 { "Holder " (id) }
                        p.who { (describe(holder)) }
                        div.scroll { table.leases {
                            thead { tr { th { "queue" } th { "task" } th { "claimed" } th { "lease expires" } } }
                            tbody {
                                @for (queue, lease) in leases {
                                    tr {
                                        td { (queue) }
                                        td { a href=(task_href(queue, lease.task_id())) { (lease.task_id()) } }
                                        td title=(rfc3339(lease.claimed_at_unix_ms())) { (relative_time(lease.claimed_at_unix_ms())) }
                                        td title=(rfc3339(lease.expires_at_unix_ms())) { (relative_time(lease.expires_at_unix_ms())) }
                                    }
                                }
                            }
                        } }
                    }
                }
            }
            script src="/assets/live.js" {}
        };
        Ok(layout(app, "Workers", content))
    };
    answer().unwrap_or_else(|refusal| refusal)
}

/// The holder of task `id` of `queue` and its lease, if it is leased.
pub fn lease_of(app: &App, queue: &str, id: i64) -> Result<Option<Lease>, Answer> {
    Ok(app.sampler().queue(queue)?.leases(Some(id), 1)?.pop())
}
