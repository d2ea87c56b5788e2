#!/usr/bin/env bash
# The tq crate as a Rust user takes it from outside the repository: a
# crate that depends on it by path, built and run. (tools/dist/rust.sh
# checks the packages: cargo builds the tq command against the packaged
# tq.)
#
#   tests/dist/rust.sh
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

mkdir -p "$work/user/src"
cat > "$work/user/Cargo.toml" <<EOF
[package]
name = "user"
version = "0.1.0"
edition = "2021"

[dependencies]
tq = { path = "$repo" }
EOF
cat > "$work/user/src/main.rs" <<'EOF'
fn main() -> tq::Result<()> {
    let path = std::env::args().nth(1).expect("a queue file");
    let queue = tq::Queue::open(&path, &tq::OpenOptions::default())?;
    queue.push(r#"{"file": "a.mp4"}"#, &tq::PushOptions::default())?;
    let task = queue.pull(&tq::PullOptions::default())?.expect("a ready task");
    println!("task {}: {}", task.id(), task.payload());
    queue.finish(task.receipt())
}
EOF
# A target folder of its own, kept between runs: the crate is built
# without the repository's .cargo/config.toml, so its SQLite differs.
output=$(cd "$work/user" && CARGO_TARGET_DIR=$repo/target/outside-crate cargo run --quiet -- "$work/queue.db")
[ "$output" = 'task 1: {"file": "a.mp4"}' ] || { echo "tests/dist/rust.sh: the crate outside printed: $output" >&2; exit 1; }
echo "tests/dist/rust.sh: a crate outside the repository built against tq by path and ran"
