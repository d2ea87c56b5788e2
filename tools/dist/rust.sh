#!/usr/bin/env bash
# The crates, as `cargo package` makes them for crates.io: tq, then the tq
# command, which cargo builds against the packaged tq (not the folder), so
# that a package missing a file fails here.
#
#   tools/dist/rust.sh OUTDIR     writes OUTDIR/rust/*.crate
set -euo pipefail

out=$1
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)
echo "tools/dist/rust.sh: cargo package --workspace (each crate built from its package)"
# From the work tree as it is, as every other package of make dist.
cargo package --quiet --locked --workspace --allow-dirty
mkdir -p "$out/rust"
cp "target/package/tq-$version.crate" "target/package/tq-cli-$version.crate" "$out/rust/"
