//! `tq serve`: a web dashboard, a JSON API and Prometheus metrics for a
//! queue file or database. A background thread samples the file every
//! [`sampling::SAMPLE_EVERY`] on handles of its own: the overview,
//! `/api/queues` and `/metrics` show the latest sample (counting a large
//! queue takes a while, and a page must not), and the rates between
//! samples make the charts and the metrics' counters. A few threads
//! answer requests; lists go through one [`Sampler`]'s handles, actions
//! through handles of their own, and an action takes a fresh sample so
//! that the pages show its effect at once.
//!
//! Where each concern lives: [`request`] reads a request, [`auth`] admits
//! it, [`routes`] sends it to its handler ([`pages`], [`delayed`], [`workers`], [`api`],
//! [`metrics`], [`actions`] or [`bulk`]), [`answer`] sends the answer back, and
//! [`sampling`] is the background thread.

mod actions;
mod answer;
mod api;
mod auth;
mod bulk;
mod delayed;
mod metrics;
mod pages;
mod request;
mod routes;
mod sampling;
mod workers;

use std::io::Write;
use std::net::SocketAddr;
use std::panic::{self, AssertUnwindSafe};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread;

use tiny_http::{Request, Server};

use crate::output::{CommandResult, Failure, Location, Outcome};
use crate::sample::{Sample, Sampler};
use answer::Answer;
use request::Incoming;
use sampling::History;

/// Threads answering requests: a slow page does not hold up the others.
const REQUEST_THREADS: usize = 4;

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
    /// The handles the request threads read through (and take a fresh
    /// sample with after an action).
    sampler: Mutex<Sampler>,
    /// The latest sample, and when it was taken (ms since the Unix epoch).
    latest: Mutex<(Arc<Sample>, i64)>,
    history: Mutex<History>,
    /// What the background samples observed of claims and ends.
    observations: metrics::Observations,
    /// The handles actions write through.
    action_handles: actions::Handles,
    allow_actions: bool,
    token: Option<String>,
    /// The address listened on, with the port picked for port 0.
    address: SocketAddr,
    /// Every action form carries it back: a page from another site cannot
    /// know it.
    csrf: String,
}

impl App {
    /// The request threads' sampler, locked: for a page's or the API's
    /// reads, and a fresh sample; an action's write never holds it (see
    /// [`actions`]).
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
    let (token, generated) = auth::access_token(args.token, args.allow_actions, args.listen)?;
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
        action_handles: actions::Handles::default(),
        allow_actions: args.allow_actions,
        token,
        address,
        csrf: auth::random_hex()?,
    });
    announce(&app, generated)?;
    {
        let app = app.clone();
        thread::spawn(move || sampling::sample_forever(&app, background, first, started_at));
    }
    answer_forever(Arc::new(server), &app);
    Ok(Outcome::Done)
}

/// Says where the dashboard is, and the access token if it was made up.
fn announce(app: &App, generated: bool) -> Result<(), Failure> {
    let address = app.address;
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
    Ok(())
}

/// Answers the server's requests on [`REQUEST_THREADS`] threads, until
/// they end.
fn answer_forever(server: Arc<Server>, app: &Arc<App>) {
    let threads: Vec<_> = (0..REQUEST_THREADS)
        .map(|_| {
            let (server, app) = (server.clone(), app.clone());
            thread::spawn(move || {
                for request in server.incoming_requests() {
                    if request::body_comes_later(&request) {
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
}

/// Answers `request`. A bug met by one request must not take a thread
/// away from the others: its connection is closed instead.
fn answer_guarded(app: &App, request: Request) {
    let _ = panic::catch_unwind(AssertUnwindSafe(|| routes::answer(app, request)));
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
