#!/usr/bin/env bash
# Installs the Go module from DISTDIR/go/proxy as a Go user would, in a fresh
# module with a fresh module cache, with no Rust and no libtq on the machine's
# paths, then builds and runs the quick start against a fresh queue file.
# Usage: tests/dist/go.sh DISTDIR   (from the repository root)
set -euo pipefail

die() { echo "tests/dist/go.sh: FAIL: $*" >&2; exit 1; }

[ $# -eq 1 ] || die "usage: tests/dist/go.sh DISTDIR"
proxy=$(realpath "$1")/go/proxy
[ -d "$proxy" ] || die "$proxy is missing (tools/dist/go.sh builds it)"
[ -f examples/go/quickstart/main.go ] || die "run it from the repository root"
module=github.com/tq-dev/tq-go
version=v$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n1)
go=$(command -v go) || die "go is not on PATH"

# shellcheck source=tests/dist/no-rust.sh
. tests/dist/no-rust.sh
# The Go toolchain's own folder stays, whatever PATH it came from.
clean_path=$(dirname "$go"):$PATH

tmp=$(mktemp -d /tmp/tq-dist-go.XXXXXX)
# The module cache is read-only: make it writable to remove it.
trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT

# Only what a user's shell would have: no CGO_*, PKG_CONFIG*, LD_LIBRARY_PATH
# or GOFLAGS, no go env file. GONOSUMDB because the checksum database has
# never seen this module (it is not published): only it skips the check,
# any other module would still be verified.
in_env() {
	env -i HOME="$HOME" PATH="$clean_path" GOENV=off GOTOOLCHAIN=local \
		GOPATH="$tmp/gopath" GOMODCACHE="$tmp/gopath/pkg/mod" GOCACHE="$tmp/gocache" \
		GOPROXY="file://$proxy" GONOSUMDB="$module" "$@"
}
in_env sh -c '! command -v cargo && ! command -v rustc' >/dev/null || die "cargo or rustc is still on PATH"

zip=$proxy/$module/@v/$version.zip
[ -f "$zip" ] || die "$zip is missing"
echo "module zip: $(du -k "$zip" | cut -f1) KiB ($zip)"

mkdir "$tmp/quickstart"
cd "$tmp/quickstart"
in_env go mod init example.com/quickstart
cp "$OLDPWD/examples/go/quickstart/main.go" .
start_ns=$(date +%s%N)
in_env go get "$module@$version"
in_env go build -o quickstart .
ms=$((($(date +%s%N) - start_ns) / 1000000))
printf 'go get + go build: %d.%d s (fresh module cache and build cache)\n' $((ms / 1000)) $((ms % 1000 / 100))
echo "quickstart binary: $(du -k quickstart | cut -f1) KiB"

libs=$(ldd ./quickstart) || die "ldd ./quickstart failed"
! grep libtq <<<"$libs" || die "the program loads a libtq.so instead of the bundled libtq.a"
out=$(in_env ./quickstart "$tmp/jobs.db")
want='task 1: {"file": "a.mp4"}'
[ "$out" = "$want" ] || die "the quick start printed '$out', want '$want'"
echo "quick start: $out"

# The module's own tests, from the module cache: they build with the bundled
# library too, and need nothing of the repository.
in_env go test -count=1 -run 'TestVersion|TestPushPullFinish|TestLinkFileByPlatformAndTag' "$module" ||
	die "the module's tests failed from the module cache"
echo "PASS: $module@$version from $proxy"
