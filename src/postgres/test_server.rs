//! The server the backend's tests run against: its URL (or why a test is
//! skipped), and a fresh schema on it.

use std::io::Write;

use super::PostgresStore;
use crate::options::OpenOptions;

/// The test server's URL, or `None` after saying why the test is skipped.
pub(super) fn server(test: &str) -> Option<String> {
    let url = std::env::var("TQ_TEST_POSTGRES_URL").ok();
    if url.is_none() {
        let _ = writeln!(
            std::io::stderr(),
            "skipped {test}: TQ_TEST_POSTGRES_URL is not set (`make test-postgres` sets it)"
        );
    }
    url
}

/// The plan PostgreSQL chooses for `sql`, as `EXPLAIN` prints it.
pub(super) fn explain(client: &mut postgres::Client, sql: &str) -> String {
    let plan: Vec<String> = client
        .query(&format!("EXPLAIN {sql}"), &[])
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    plan.join("\n")
}

/// Opens schema `schema` afresh on queue `queue`.
pub(super) fn fresh_store(url: &str, schema: &str, queue: &str) -> PostgresStore {
    let mut client = postgres::Client::connect(url, postgres::NoTls).unwrap();
    client
        .batch_execute(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"))
        .unwrap();
    let mut options = OpenOptions::new();
    options
        .postgres_schema(schema)
        .unwrap()
        .queue(queue)
        .unwrap();
    PostgresStore::open(url, &options).unwrap()
}
