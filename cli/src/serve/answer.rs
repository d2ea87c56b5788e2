//! Answers: what a handler returns, and how it goes out (the headers every
//! answer carries, and redirections that stay on this server).

use tiny_http::{Header, Request, Response};

use crate::output::Failure;

/// An answer: status, content type and body, or a redirection.
pub enum Answer {
    Body {
        status: u16,
        content_type: &'static str,
        body: String,
    },
    /// 303 See Other: where a form's POST, or a search, leads.
    Redirect(String),
}

impl Answer {
    /// A page.
    pub fn html(body: String) -> Answer {
        Answer::Body {
            status: 200,
            content_type: "text/html; charset=utf-8",
            body,
        }
    }

    /// A JSON answer.
    pub fn json(value: &serde_json::Value) -> Answer {
        Answer::Body {
            status: 200,
            content_type: "application/json",
            body: value.to_string(),
        }
    }

    /// A plain-text error: `status` with `message` as the body.
    pub fn error(status: u16, message: impl Into<String>) -> Answer {
        Answer::Body {
            status,
            content_type: "text/plain; charset=utf-8",
            body: format!("{}\n", message.into()),
        }
    }
}

impl From<tq::Error> for Answer {
    fn from(err: tq::Error) -> Answer {
        Failure::from(err).into()
    }
}

impl From<Failure> for Answer {
    fn from(failure: Failure) -> Answer {
        match failure {
            Failure::Message(message) => Answer::error(500, message),
            Failure::ClosedOutput => Answer::error(500, "closed output"),
        }
    }
}

pub(super) fn header(name: &str, value: &str) -> Header {
    Header::from_bytes(name.as_bytes(), value.as_bytes())
        .expect("header names and values are ASCII")
}

/// Sends `answer` to `request`, with the `extra` headers and those every
/// answer carries.
pub(super) fn respond(request: Request, answer: Answer, extra: Vec<Header>) {
    let mut response = match answer {
        Answer::Body {
            status,
            content_type,
            body,
        } => Response::from_string(body)
            .with_status_code(status)
            .with_header(header("Content-Type", content_type)),
        Answer::Redirect(location) => Response::from_string(String::new())
            .with_status_code(303)
            .with_header(header("Location", &location)),
    };
    for extra in extra {
        response.add_header(extra);
    }
    response.add_header(header("X-Frame-Options", "DENY"));
    response.add_header(header("X-Content-Type-Options", "nosniff"));
    response.add_header(header("Referrer-Policy", "same-origin"));
    response.add_header(header(
        "Content-Security-Policy",
        "default-src 'self'; frame-ancestors 'none'; form-action 'self'",
    ));
    response.add_header(header("Cache-Control", "no-store"));
    // The client may have gone away: nothing to do about it.
    let _ = request.respond(response);
}

/// `path` if it is a path on this server, else `/`: a redirection never
/// sends the browser to another site (`//host/...` would), and its
/// Location header holds only printable ASCII.
pub fn local_path(path: Option<&str>) -> &str {
    path.filter(|path| {
        path.starts_with('/')
            && !path.starts_with("//")
            && path
                .bytes()
                .all(|byte| byte.is_ascii_graphic() && byte != b'\\')
    })
    .unwrap_or("/")
}
