//! `tq serve`: a web dashboard, a JSON API and Prometheus metrics for a
//! queue file or database. A background thread samples the file every
//! [`sampling::SAMPLE_EVERY`] on handles of its own: the overview,
//! `/api/queues` and `/metrics` show the latest sample (counting a large
//! queue takes a while, and a page must not), and the rates between
//! samples make the charts and the metrics' counters. A few threads
//! answer requests; lists and actions go through one [`Sampler`]'s
//! handles, and an action takes a fresh sample so that the pages show its
//! effect at once.

mod api;
mod metrics;
mod pages;
mod sampling;

use std::fs::File;
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::panic::{self, AssertUnwindSafe};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread;

use tiny_http::{Header, Method, Request, Response, Server};

use crate::output::{CommandResult, Failure, Location, Outcome};
use crate::sample::{Sample, Sampler};
use sampling::History;

/// Threads answering requests: a slow page does not hold up the others.
const REQUEST_THREADS: usize = 4;
/// The largest request body read (action forms are a few fields).
const MAX_BODY: u64 = 64 * 1024;
/// The start of the name of the cookie that carries the access token in a
/// browser; the port follows (see [`token_cookie`]).
const TOKEN_COOKIE: &str = "tq_token_";

/// Arguments of `tq serve`.
#[derive(clap::Args)]
pub struct Args {
    /// The queue file or PostgreSQL URL; `-`: $TQ_DATABASE_URL.
    #[arg(value_parser = Location::parse)]
    file: Location,

    /// The address and port to listen on (port 0: any free port).
    #[arg(long, default_value = "127.0.0.1:7070")]
    listen: SocketAddr,

    /// Allow the actions that change the queue: retry, purge, cancel,
    /// pause and resume. Without it the dashboard is read-only.
    #[arg(long)]
    allow_actions: bool,

    /// Require this token of every request (a cookie set by opening
    /// `/?token=T`, or an `Authorization: Bearer T` header). Listening on
    /// an address other than loopback, or allowing actions, requires one:
    /// without --token, one is made up and printed once. Without a token
    /// (read-only, on loopback), any local process or user can read every
    /// page, payload and result.
    #[arg(long, value_name = "T")]
    token: Option<String>,
}

/// What every request thread shares.
pub struct App {
    location: Location,
    /// The handles of the request threads.
    sampler: Mutex<Sampler>,
    /// The latest sample, and when it was taken (ms since the Unix epoch).
    latest: Mutex<(Arc<Sample>, i64)>,
    history: Mutex<History>,
    /// What the background samples observed of claims and ends.
    observations: metrics::Observations,
    allow_actions: bool,
    token: Option<String>,
    /// The address listened on, with the port picked for port 0.
    address: SocketAddr,
    /// Every action form carries it back: a page from another site cannot
    /// know it.
    csrf: String,
}

impl App {
    fn sampler(&self) -> MutexGuard<'_, Sampler> {
        // A panic while sampling leaves the sampler usable: its handles
        // hold no half-done state.
        self.sampler
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn history(&self) -> MutexGuard<'_, History> {
        self.history
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The latest sample, and when it was taken.
    fn latest(&self) -> (Arc<Sample>, i64) {
        let latest = self
            .latest
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        (latest.0.clone(), latest.1)
    }

    fn set_latest(&self, sample: Arc<Sample>) {
        *self
            .latest
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) =
            (sample, crate::output::now_unix_ms());
    }

    /// Samples the file now, for the pages to show an action's effect.
    fn refresh(&self) -> Result<(), Failure> {
        let sample = self.sampler().sample()?;
        self.set_latest(Arc::new(sample));
        Ok(())
    }
}

/// Runs `tq serve` until the process is stopped.
pub fn run(args: Args) -> CommandResult {
    // Actions need a token even on loopback: any local process could
    // otherwise read a page's CSRF token and post with it.
    let generated = args.token.is_none() && (args.allow_actions || !args.listen.ip().is_loopback());
    let token = match args.token {
        Some(token)
            if token.is_empty()
                || !token
                    .bytes()
                    .all(|byte| byte.is_ascii_graphic() && byte != b';' && byte != b',') =>
        {
            // It goes into a cookie as it is.
            return Err(Failure::new(
                "--token must be letters, digits and punctuation other than ; and , (no spaces)",
            ));
        }
        Some(token) => Some(token),
        None if generated => Some(random_hex()?),
        None => None,
    };
    let sampler = Sampler::open(&args.file, None)?;
    let mut background = Sampler::open(&args.file, None)?;
    let started_at = crate::output::now_unix_ms();
    let first = Arc::new(background.sample()?);
    let server = listen(args.listen)
        .map_err(|err| Failure::new(format!("listening on {}: {err}", args.listen)))?;
    let address = server
        .server_addr()
        .to_ip()
        .ok_or_else(|| Failure::new("the server has no IP address"))?;
    let app = Arc::new(App {
        location: args.file,
        sampler: Mutex::new(sampler),
        latest: Mutex::new((first.clone(), crate::output::now_unix_ms())),
        history: Mutex::new(History::default()),
        observations: metrics::Observations::default(),
        allow_actions: args.allow_actions,
        token,
        address,
        csrf: random_hex()?,
    });
    let mut out = std::io::stdout();
    writeln!(
        out,
        "serving {} on http://{address}/ ({})",
        app.location,
        if app.allow_actions {
            "actions allowed"
        } else {
            "read-only"
        }
    )?;
    if let (true, Some(token)) = (generated, &app.token) {
        writeln!(out, "access token (shown once): {token}")?;
        writeln!(out, "open http://{address}/?token={token}")?;
    }
    out.flush()?;

    let server = Arc::new(server);
    {
        let app = app.clone();
        thread::spawn(move || sampling::sample_forever(&app, background, first, started_at));
    }
    let threads: Vec<_> = (0..REQUEST_THREADS)
        .map(|_| {
            let (server, app) = (server.clone(), app.clone());
            thread::spawn(move || {
                for request in server.incoming_requests() {
                    if body_comes_later(&request) {
                        // A client that never sends the body would hold
                        // this thread (even a refusal drains the body).
                        let app = app.clone();
                        thread::spawn(move || answer_guarded(&app, request));
                    } else {
                        answer_guarded(&app, request);
                    }
                }
            })
        })
        .collect();
    for thread in threads {
        let _ = thread.join();
    }
    Ok(Outcome::Done)
}

/// Answers `request`. A bug met by one request must not take a thread
/// away from the others: its connection is closed instead.
fn answer_guarded(app: &App, request: Request) {
    let _ = panic::catch_unwind(AssertUnwindSafe(|| answer(app, request)));
}

/// Whether the request's body is still to come through its connection:
/// tiny_http 0.12 reads a body of at most 1 KiB before it hands the
/// request over, unless the client asked for `100 Continue` first, and
/// leaves a longer one, or a chunked one, to whoever reads (or drops) the
/// request.
fn body_comes_later(request: &Request) -> bool {
    let has = |name: &'static str| request.headers().iter().any(|h| h.field.equiv(name));
    match request.body_length() {
        Some(0) => false,
        Some(length) => length > 1024 || has("Expect"),
        None => has("Transfer-Encoding"),
    }
}

/// A server listening on `address` whose connections send each write at
/// once. The server writes an answer through a buffer of 1 KiB, so a page
/// longer than that goes out in several writes; with Nagle's algorithm on,
/// the second waits for the browser to acknowledge the first, which on a
/// kept-alive connection it delays by 40 ms. Linux gives an accepted
/// connection the listening socket's `TCP_NODELAY`.
fn listen(address: SocketAddr) -> Result<Server, Box<dyn std::error::Error + Send + Sync>> {
    let listener = std::net::TcpListener::bind(address)?;
    set_no_delay(&listener)?;
    Server::from_listener(listener, None)
}

fn set_no_delay(listener: &std::net::TcpListener) -> std::io::Result<()> {
    socket2::SockRef::from(listener).set_tcp_nodelay(true)
}

/// A request as the handlers see it: the path split into its decoded
/// segments, the query's fields, and the form's fields for a POST.
pub struct Incoming {
    pub method: Method,
    pub segments: Vec<String>,
    pub query: Vec<(String, String)>,
    pub form: Vec<(String, String)>,
    origin: Option<String>,
    fetch_site: Option<String>,
    host: Option<String>,
    authorization: Option<String>,
    cookie: Option<String>,
}

impl Incoming {
    /// The query's field `name`, if given and not empty.
    pub fn query(&self, name: &str) -> Option<&str> {
        field(&self.query, name)
    }

    /// The form's field `name`, if given and not empty.
    pub fn form(&self, name: &str) -> Option<&str> {
        field(&self.form, name)
    }

    /// The form's field `name`, if given, even empty.
    pub fn form_value(&self, name: &str) -> Option<&str> {
        self.form
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }
}

fn field<'a>(fields: &'a [(String, String)], name: &str) -> Option<&'a str> {
    fields
        .iter()
        .find(|(key, value)| key == name && !value.is_empty())
        .map(|(_, value)| value.as_str())
}

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

fn header(name: &str, value: &str) -> Header {
    Header::from_bytes(name.as_bytes(), value.as_bytes())
        .expect("header names and values are ASCII")
}

fn answer(app: &App, mut request: Request) {
    let respond = |request: Request, answer: Answer, extra: Vec<Header>| {
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
    };
    let incoming = match read_request(&mut request) {
        Ok(incoming) => incoming,
        Err(answer) => return respond(request, answer, vec![]),
    };
    if app.token.is_none() && !loopback_host(incoming.host.as_deref(), app.address.port()) {
        // Without a token only loopback is listened on: a request naming
        // another host comes from a page whose name was pointed at this
        // machine (DNS rebinding), which must read nothing.
        return respond(
            request,
            Answer::error(
                421,
                "the Host must be localhost, 127.0.0.1 or [::1] with the port",
            ),
            vec![],
        );
    }
    if let Some(token) = &app.token {
        let bearer = incoming
            .authorization
            .as_deref()
            .and_then(|value| value.strip_prefix("Bearer ").map(str::to_owned));
        let cookie_name = token_cookie(app.address.port());
        let cookie = incoming.cookie.as_deref().and_then(|cookies| {
            cookies.split(';').find_map(|cookie| {
                let (name, value) = cookie.trim().split_once('=')?;
                (name == cookie_name).then(|| value.to_owned())
            })
        });
        let in_query = incoming.query("token").map(str::to_owned);
        let given =
            |value: &Option<String>| value.as_deref().is_some_and(|value| same(value, token));
        if given(&in_query) && incoming.method == Method::Get {
            // Keep the token out of the address bar and the history: a
            // cookie carries it from now on.
            let cookie = header(
                "Set-Cookie",
                &format!("{cookie_name}={token}; Path=/; HttpOnly; SameSite=Strict"),
            );
            let path = local_path(request.url().split('?').next()).to_owned();
            return respond(request, Answer::Redirect(path), vec![cookie]);
        }
        if !given(&bearer) && !given(&cookie) {
            return respond(
                request,
                Answer::error(
                    401,
                    "a token is required: open /?token=T once, or send `Authorization: Bearer T`",
                ),
                vec![header("WWW-Authenticate", "Bearer")],
            );
        }
    }
    let answer = if incoming.method == Method::Post {
        match post_refusal(app, &incoming) {
            Some(refusal) => refusal,
            None => pages::act(app, &incoming),
        }
    } else if incoming.method == Method::Get {
        route_get(app, &incoming)
    } else {
        Answer::error(405, "only GET and POST")
    };
    respond(request, answer, vec![])
}

fn route_get(app: &App, incoming: &Incoming) -> Answer {
    let segments: Vec<&str> = incoming.segments.iter().map(String::as_str).collect();
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
        ["queues", queue] => pages::tasks(app, queue, incoming),
        ["queues", queue, "dead"] => pages::dead(app, queue, incoming),
        ["tasks", id] => pages::task(app, id, incoming),
        ["api", "queues"] => api::queues(app),
        ["api", "queues", queue, "tasks"] => api::tasks(app, queue, incoming),
        ["api", "queues", queue, "keys", key] => api::task_by_key(app, queue, key),
        ["api", "tasks", id] => api::task(app, id, incoming),
        ["metrics"] => metrics::answer(app),
        _ => Answer::error(404, "no such page"),
    }
}

/// Why a POST is refused, if it is: actions not allowed, a request from
/// another site, or a form without this process's CSRF token.
fn post_refusal(app: &App, incoming: &Incoming) -> Option<Answer> {
    if !app.allow_actions {
        return Some(Answer::error(
            403,
            "read-only: start tq serve with --allow-actions",
        ));
    }
    if let Some(site) = &incoming.fetch_site {
        if site != "same-origin" && site != "none" {
            return Some(Answer::error(403, "cross-site request refused"));
        }
    }
    if let Some(origin) = &incoming.origin {
        // `https://` is the dashboard's origin behind a TLS proxy that
        // passes the Host on.
        let same_origin = incoming.host.as_ref().is_some_and(|host| {
            origin
                .strip_prefix("http://")
                .or_else(|| origin.strip_prefix("https://"))
                == Some(host.as_str())
        });
        if !same_origin {
            return Some(Answer::error(403, "cross-site request refused"));
        }
    }
    if !incoming
        .form("csrf")
        .is_some_and(|csrf| same(csrf, &app.csrf))
    {
        return Some(Answer::error(
            403,
            "the form's CSRF token is missing or wrong: reload the page",
        ));
    }
    None
}

fn read_request(request: &mut Request) -> Result<Incoming, Answer> {
    let url = request.url().to_owned();
    let (path, query) = url.split_once('?').unwrap_or((&url, ""));
    let segments = path
        .split('/')
        .filter(|segment| !segment.is_empty())
        .map(|segment| {
            percent_encoding::percent_decode_str(segment)
                .decode_utf8()
                .map(|segment| segment.into_owned())
                .map_err(|_| Answer::error(400, "the path is not UTF-8"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let query = form_urlencoded::parse(query.as_bytes())
        .into_owned()
        .collect();
    let header_value = |name: &'static str| {
        request
            .headers()
            .iter()
            .find(|header| header.field.equiv(name))
            .map(|header| header.value.as_str().to_owned())
    };
    let (origin, fetch_site, host) = (
        header_value("Origin"),
        header_value("Sec-Fetch-Site"),
        header_value("Host"),
    );
    let (authorization, cookie) = (header_value("Authorization"), header_value("Cookie"));
    let mut form = Vec::new();
    if *request.method() == Method::Post {
        let mut body = Vec::new();
        request
            .as_reader()
            .take(MAX_BODY + 1)
            .read_to_end(&mut body)
            .map_err(|err| Answer::error(400, format!("reading the request: {err}")))?;
        if body.len() as u64 > MAX_BODY {
            return Err(Answer::error(413, "the form is too large"));
        }
        form = form_urlencoded::parse(&body).into_owned().collect();
    }
    Ok(Incoming {
        method: request.method().clone(),
        segments,
        query,
        form,
        origin,
        fetch_site,
        host,
        authorization,
        cookie,
    })
}

/// The name of the cookie that carries the access token of the server on
/// `port`: browsers send a host's cookies to every port of it, so a name
/// of its own keeps two dashboards from overwriting each other's token.
fn token_cookie(port: u16) -> String {
    format!("{TOKEN_COOKIE}{port}")
}

/// Whether `host` (a Host header) names this machine's loopback
/// interface and `port`.
fn loopback_host(host: Option<&str>, port: u16) -> bool {
    let Some((name, given_port)) = host.and_then(|host| host.rsplit_once(':')) else {
        return false;
    };
    given_port.parse() == Ok(port) && matches!(name, "localhost" | "127.0.0.1" | "[::1]")
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

/// Whether two secrets are equal, in a time that does not tell how much
/// of them matched.
fn same(given: &str, expected: &str) -> bool {
    given.len() == expected.len()
        && given
            .bytes()
            .zip(expected.bytes())
            .fold(0, |differ, (a, b)| differ | (a ^ b))
            == 0
}

/// 128 random bits from the system, in hexadecimal.
fn random_hex() -> Result<String, Failure> {
    let mut bytes = [0u8; 16];
    File::open("/dev/urandom")
        .and_then(|mut random| random.read_exact(&mut bytes))
        .map_err(|err| Failure::new(format!("reading /dev/urandom: {err}")))?;
    Ok(bytes.iter().map(|byte| format!("{byte:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use std::net::{TcpListener, TcpStream};

    use super::set_no_delay;

    /// What `listen` relies on: connections accepted from a listener with
    /// `TCP_NODELAY` have it, and so send a page's writes without waiting.
    #[test]
    fn connections_accepted_from_the_listener_send_at_once() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let plain = {
            let _client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
            listener.accept().unwrap().0.nodelay().unwrap()
        };
        assert!(!plain, "TCP_NODELAY is off by default");
        set_no_delay(&listener).unwrap();
        let _client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        assert!(listener.accept().unwrap().0.nodelay().unwrap());
    }
}
