//! Reading a request: its path, query and form (with the body's size
//! limit), and the headers that the access checks look at.

use std::io::Read;

use tiny_http::{Method, Request};

use super::Answer;

/// The largest request body read (action forms are a few fields).
const MAX_BODY: u64 = 64 * 1024;

/// A request as the handlers see it: the path split into its decoded
/// segments, the query's fields, and the form's fields for a POST.
pub struct Incoming {
    pub method: Method,
    pub segments: Vec<String>,
    pub query: Vec<(String, String)>,
    pub form: Vec<(String, String)>,
    pub(super) origin: Option<String>,
    pub(super) fetch_site: Option<String>,
    pub(super) host: Option<String>,
    pub(super) authorization: Option<String>,
    pub(super) cookie: Option<String>,
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

    /// Every value the form gives field `name` (ticked boxes of one name).
    pub fn form_values<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.form
            .iter()
            .filter(move |(key, _)| key == name)
            .map(|(_, value)| value.as_str())
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

/// Whether the request's body is still to come through its connection:
/// tiny_http 0.12 reads a body of at most 1 KiB before it hands the
/// request over, unless the client asked for `100 Continue` first, and
/// leaves a longer one, or a chunked one, to whoever reads (or drops) the
/// request.
pub(super) fn body_comes_later(request: &Request) -> bool {
    let has = |name: &'static str| request.headers().iter().any(|h| h.field.equiv(name));
    match request.body_length() {
        Some(0) => false,
        Some(length) => length > 1024 || has("Expect"),
        None => has("Transfer-Encoding"),
    }
}

pub(super) fn read_request(request: &mut Request) -> Result<Incoming, Answer> {
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
