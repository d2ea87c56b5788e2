//! Routing: which method and path go to which handler, after the request
//! is read and admitted.

use tiny_http::{Method, Request};

use super::answer::respond;
use super::request::read_request;
use super::{actions, api, auth, bulk, delayed, metrics, pages, workers, Answer, App, Incoming};

/// Reads, admits, routes and answers `request`.
pub(super) fn answer(app: &App, mut request: Request) {
    let incoming = match read_request(&mut request) {
        Ok(incoming) => incoming,
        Err(answer) => return respond(request, answer, vec![]),
    };
    if let Err((answer, extra)) = auth::admit(app, &incoming, request.url()) {
        return respond(request, answer, extra);
    }
    let answer = route(app, &incoming);
    respond(request, answer, vec![])
}

/// The handler's answer to an admitted request.
fn route(app: &App, incoming: &Incoming) -> Answer {
    let segments: Vec<&str> = incoming.segments.iter().map(String::as_str).collect();
    if incoming.method == Method::Post {
        if let Some(refusal) = auth::post_refusal(app, incoming) {
            return refusal;
        }
        return match segments.as_slice() {
            ["queues", queue, "actions", "confirm"] => bulk::confirm(app, queue, incoming),
            ["queues", queue, "actions", name] => actions::act(app, queue, name, incoming),
            _ => Answer::error(404, "no such action"),
        };
    }
    if incoming.method != Method::Get {
        return Answer::error(405, "only GET and POST");
    }
    match segments.as_slice() {
        [] => pages::overview(app),
        ["assets", "style.css"] => Answer::Body {
            status: 200,
            content_type: "text/css; charset=utf-8",
            body: include_str!("style.css").to_owned(),
        },
        ["assets", "overview.js"] => Answer::Body {
            status: 200,
            content_type: "text/javascript; charset=utf-8",
            body: include_str!("overview.js").to_owned(),
        },
        ["assets", "live.js"] => Answer::Body {
            status: 200,
            content_type: "text/javascript; charset=utf-8",
            body: include_str!("live.js").to_owned(),
        },
        ["schedules"] => pages::schedules(app),
        ["workers"] => workers::page(app),
        ["queues", queue] => pages::tasks(app, queue, incoming),
        ["queues", queue, "dead"] => pages::dead(app, queue, incoming),
        ["queues", queue, "scheduled"] => {
            delayed::page(app, queue, tq::Delayed::FirstAttempt, incoming)
        }
        ["queues", queue, "retrying"] => delayed::page(app, queue, tq::Delayed::Retry, incoming),
        ["tasks", id] => pages::task(app, id, incoming),
        ["api", "queues"] => api::queues(app),
        ["api", "queues", queue, "tasks"] => api::tasks(app, queue, incoming),
        ["api", "queues", queue, "keys", key] => api::task_by_key(app, queue, key),
        ["api", "tasks", id] => api::task(app, id, incoming),
        ["metrics"] => metrics::answer(app),
        _ => Answer::error(404, "no such page"),
    }
}
