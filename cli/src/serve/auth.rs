//! Who may ask: the access token (its cookie, its `Authorization` header,
//! the Host check without one), and the checks a POST passes (actions
//! allowed, same origin, the form's CSRF token).

use std::fs::File;
use std::io::Read;
use std::net::SocketAddr;

use tiny_http::{Header, Method};

use super::answer::{header, local_path};
use super::{Answer, App, Incoming};
use crate::output::Failure;

/// The start of the name of the cookie that carries the access token in a
/// browser; the port follows (see [`token_cookie`]).
const TOKEN_COOKIE: &str = "tq_token_";

/// The access token `tq serve` requires, if any, and whether it was made
/// up here (and so is to be printed once).
pub(super) fn access_token(
    given: Option<String>,
    allow_actions: bool,
    listen: SocketAddr,
) -> Result<(Option<String>, bool), Failure> {
    // Actions need a token even on loopback: any local process could
    // otherwise read a page's CSRF token and post with it.
    let generated = given.is_none() && (allow_actions || !listen.ip().is_loopback());
    let token = match given {
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
    Ok((token, generated))
}

/// Whether `incoming` (to `url`) may be answered: `Err` holds the answer
/// to send instead, with its extra headers.
pub(super) fn admit(
    app: &App,
    incoming: &Incoming,
    url: &str,
) -> Result<(), (Answer, Vec<Header>)> {
    if app.token.is_none() && !loopback_host(incoming.host.as_deref(), app.address.port()) {
        // Without a token only loopback is listened on: a request naming
        // another host comes from a page whose name was pointed at this
        // machine (DNS rebinding), which must read nothing.
        return Err((
            Answer::error(
                421,
                "the Host must be localhost, 127.0.0.1 or [::1] with the port",
            ),
            vec![],
        ));
    }
    match &app.token {
        Some(token) => check_token(app, token, incoming, url),
        None => Ok(()),
    }
}

/// Whether `incoming` carries `token`; a GET with it in the query is sent
/// back to its path with a cookie that carries it from then on.
fn check_token(
    app: &App,
    token: &str,
    incoming: &Incoming,
    url: &str,
) -> Result<(), (Answer, Vec<Header>)> {
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
    let given = |value: &Option<String>| value.as_deref().is_some_and(|value| same(value, token));
    if given(&in_query) && incoming.method == Method::Get {
        // Keep the token out of the address bar and the history: a
        // cookie carries it from now on.
        let cookie = header(
            "Set-Cookie",
            &format!("{cookie_name}={token}; Path=/; HttpOnly; SameSite=Strict"),
        );
        let path = local_path(url.split('?').next()).to_owned();
        return Err((Answer::Redirect(path), vec![cookie]));
    }
    if !given(&bearer) && !given(&cookie) {
        return Err((
            Answer::error(
                401,
                "a token is required: open /?token=T once, or send `Authorization: Bearer T`",
            ),
            vec![header("WWW-Authenticate", "Bearer")],
        ));
    }
    Ok(())
}

/// Why a POST is refused, if it is: actions not allowed, a request from
/// another site, or a form without this process's CSRF token.
pub(super) fn post_refusal(app: &App, incoming: &Incoming) -> Option<Answer> {
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
pub(super) fn random_hex() -> Result<String, Failure> {
    let mut bytes = [0u8; 16];
    File::open("/dev/urandom")
        .and_then(|mut random| random.read_exact(&mut bytes))
        .map_err(|err| Failure::new(format!("reading /dev/urandom: {err}")))?;
    Ok(bytes.iter().map(|byte| format!("{byte:02x}")).collect())
}
