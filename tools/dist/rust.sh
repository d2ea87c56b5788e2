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
# Cargo builds the tq command against the packaged tq, which it unpacks
# into CARGO_HOME and compiles into target/ under a name made of this
# clone's path and tq's version. It takes both as never changing, as a
# published crate never does: a second run from the same path at the same
# version would build the tq command against the tq of the first run. Remove
# the unpacked copies and tq's compiled ones first.
cargo_home=${CARGO_HOME:-$HOME/.cargo}
rm -rf "$cargo_home"/registry/src/*/"tq-$version" "$cargo_home"/registry/src/*/"tq-cli-$version"
cargo clean --quiet --package tq
cargo package --quiet --locked --workspace --allow-dirty
mkdir -p "$out/rust"
cp "target/package/tq-$version.crate" "target/package/tq-cli-$version.crate" "$out/rust/"
