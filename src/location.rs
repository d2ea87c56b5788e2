//! What a queue's location names: which backend stores the queue, decided
//! here once from the location for the engine and the `tq` command; and how
//! the location is shown in messages: a PostgreSQL URL without its
//! password, so that no command output, log line or exception ever carries
//! it.

/// The backend that stores a queue, as [`Queue::open`] decides it from the
/// location it is given.
///
/// [`Queue::open`]: crate::Queue::open
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// An SQLite file: any location that is not a PostgreSQL URL.
    Sqlite,
    /// A PostgreSQL database: a `postgres://` or `postgresql://` URL, the
    /// scheme in any case.
    Postgres,
}

impl Backend {
    /// The backend that stores the queue at `location` (a file path or a
    /// URL).
    pub fn of(location: &str) -> Backend {
        let lower = location.get(..13).unwrap_or(location).to_ascii_lowercase();
        if lower.starts_with("postgres://") || lower.starts_with("postgresql://") {
            Backend::Postgres
        } else {
            Backend::Sqlite
        }
    }
}

/// Returns `location` (a file path or a URL, as given to [`Queue::open`])
/// as it may be shown to people: a URL loses the password of its user
/// information and any `password` query parameter; the user, hosts,
/// database and other parameters stay. Anything that is not a URL, such as
/// a file path, comes back unchanged.
///
/// `postgres://alice:s3cret@db.example:5432/jobs?password=x&sslmode=require`
/// becomes `postgres://alice@db.example:5432/jobs?sslmode=require`.
///
/// [`Queue::open`]: crate::Queue::open
pub fn redacted_location(location: &str) -> String {
    let Some(scheme_end) = url_scheme_end(location) else {
        return location.to_owned();
    };
    let (scheme, rest) = location.split_at(scheme_end + "://".len());
    // The query starts at the first `?`, the fragment at the first `#`.
    let tail_start = rest.find(['?', '#']).unwrap_or(rest.len());
    let (before_query, tail) = rest.split_at(tail_start);
    // The user information ends at the last `@` before the query, so that a
    // password holding an unencoded `@` or `/` is hidden whole.
    let before_query = match before_query.rfind('@') {
        Some(at) => {
            let (userinfo, host_and_path) = before_query.split_at(at);
            let user = userinfo.split(':').next().unwrap_or("");
            format!("{user}{host_and_path}")
        }
        None => before_query.to_owned(),
    };
    let (query, fragment) = match tail.find('#') {
        Some(hash) => tail.split_at(hash),
        None => (tail, ""),
    };
    let kept: Vec<&str> = query
        .strip_prefix('?')
        .unwrap_or("")
        .split('&')
        .filter(|pair| !pair.is_empty() && !is_password_parameter(pair))
        .collect();
    let query = if kept.is_empty() {
        String::new()
    } else {
        format!("?{}", kept.join("&"))
    };
    format!("{scheme}{before_query}{query}{fragment}")
}

/// Where `scheme` ends in `scheme://...` (RFC 3986: a letter, then letters,
/// digits, `+`, `-` or `.`), or `None` when `text` is not such a URL.
fn url_scheme_end(text: &str) -> Option<usize> {
    let end = text.find("://")?;
    let scheme = &text[..end];
    let mut chars = scheme.chars();
    let starts_with_letter = chars.next().is_some_and(|c| c.is_ascii_alphabetic());
    let rest_valid = chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    (starts_with_letter && rest_valid).then_some(end)
}

/// Whether the query pair `key=value` sets the password; the key is
/// compared after percent-decoding, as the URL's parser reads it.
fn is_password_parameter(pair: &str) -> bool {
    let key = pair.split('=').next().unwrap_or("");
    percent_decoded(key).eq_ignore_ascii_case(b"password")
}

/// `text` with each `%XY` replaced by the byte it encodes.
fn percent_decoded(text: &str) -> Vec<u8> {
    let bytes = text.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|pair| std::str::from_utf8(pair).ok())
            .and_then(|pair| u8::from_str_radix(pair, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(byte)) => {
                decoded.push(byte);
                i += 3;
            }
            (byte, _) => {
                decoded.push(byte);
                i += 1;
            }
        }
    }
    decoded
}

#[cfg(test)]
mod tests {
    use super::{redacted_location, Backend};

    #[test]
    fn a_postgres_url_in_any_case_names_postgres_and_anything_else_a_file() {
        for url in [
            "postgres://u@h/db",
            "postgresql://u@h/db",
            "POSTGRES://u@h/db",
            "PostgreSQL://h",
        ] {
            assert_eq!(Backend::of(url), Backend::Postgres, "{url}");
        }
        for path in [
            "",
            "q.db",
            "postgres",
            "postgres:/h/db",
            "./postgres://h",
            "/tmp/postgresql://x",
            "é",
        ] {
            assert_eq!(Backend::of(path), Backend::Sqlite, "{path}");
        }
    }

    #[test]
    fn a_file_path_is_unchanged() {
        for path in [
            "jobs.db",
            "/var/lib/app/jobs.db",
            "./a:b@c.db",
            "",
            "file.db?x=1",
        ] {
            assert_eq!(redacted_location(path), path);
        }
    }

    #[test]
    fn the_userinfo_password_is_removed_and_the_user_kept() {
        assert_eq!(
            redacted_location("postgres://alice:s3cret@127.0.0.1:1/db"),
            "postgres://alice@127.0.0.1:1/db"
        );
        assert_eq!(
            redacted_location("postgresql://alice:s3cret@h1:5432,h2:5433/db"),
            "postgresql://alice@h1:5432,h2:5433/db"
        );
    }

    #[test]
    fn a_password_with_unencoded_separators_is_removed_whole() {
        assert_eq!(
            redacted_location("postgres://alice:p@ss/w:rd@host/db"),
            "postgres://alice@host/db"
        );
        assert_eq!(
            redacted_location("postgres://alice:p%40ss@host/db"),
            "postgres://alice@host/db"
        );
    }

    #[test]
    fn password_query_parameters_are_removed_and_the_others_kept() {
        assert_eq!(
            redacted_location("postgres://alice@host/db?password=s3cret&sslmode=require"),
            "postgres://alice@host/db?sslmode=require"
        );
        assert_eq!(
            redacted_location("postgres://host/db?sslmode=disable&PASSWORD=a&pass%77ord=b"),
            "postgres://host/db?sslmode=disable"
        );
        assert_eq!(
            redacted_location("postgres://alice:x@host/db?password=y#frag"),
            "postgres://alice@host/db#frag"
        );
    }

    #[test]
    fn a_url_without_a_password_is_unchanged() {
        for url in [
            "postgres://alice@host/db",
            "postgres://host/db?application_name=a@b",
            "postgres:///db?host=/run/postgresql",
        ] {
            assert_eq!(redacted_location(url), url);
        }
    }
}
