#!/usr/bin/env bash
# Builds the Go module github.com/tq-dev/tq-go with libtq.a inside it for
# linux/amd64, so that `go get` and `go build` need nothing else:
#   OUTDIR/module/  the module's files, what its own repository is filled with
#   OUTDIR/proxy/   the same version as a module proxy serves it
#                   (GOPROXY=file://OUTDIR/proxy), zipped by golang.org/x/mod
# Usage: tools/dist/go.sh LIBDIR OUTDIR   (from the repository root)
set -euo pipefail

die() { echo "tools/dist/go.sh: $*" >&2; exit 1; }

[ $# -eq 2 ] || die "usage: tools/dist/go.sh LIBDIR OUTDIR"
libdir=$1
outdir=$2
[ -f Cargo.toml ] && [ -d bindings/go ] || die "run it from the repository root"
[ -f "$libdir/libtq.a" ] || die "$libdir/libtq.a is missing"
[ -f include/tq.h ] || die "include/tq.h is missing"
command -v go >/dev/null || die "go is not on PATH"
command -v git >/dev/null || die "git is not on PATH (it lists the binding's files)"

version=v$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n1)
[ "$version" != v ] || die "no version in Cargo.toml"
# The version's time in the proxy's .info: the commit's, so that a rebuild
# of the same commit gives the same files.
stamp=$(git log -1 --format=%cI)

echo "== go: module github.com/tq-dev/tq-go $version into $outdir"
rm -rf "$outdir"
module=$outdir/module
mkdir -p "$module/lib/linux_amd64"

# The files git would commit (tracked or new, not ignored, not deleted): no
# test queue or other leftover of a run goes into the module.
echo "-- copying bindings/go's files (links followed: include/tq.h)"
git ls-files -z --cached --others --exclude-standard bindings/go | while IFS= read -r -d '' file; do
	[ -e "$file" ] || continue
	dest=$module/${file#bindings/go/}
	mkdir -p "$(dirname "$dest")"
	cp -L "$file" "$dest"
done
cmp -s include/tq.h "$module/include/tq.h" || die "the module's include/tq.h is not include/tq.h"
echo "-- adding $libdir/libtq.a as lib/linux_amd64/libtq.a"
cp "$libdir/libtq.a" "$module/lib/linux_amd64/libtq.a"

# The zipper is a Go program of its own, golang.org/x/mod pinned in its
# go.mod and go.sum, downloaded into build/ rather than the user's cache.
tool_cache=$PWD/build/cache/go
echo "-- building tools/dist/gomodproxy (modules in $tool_cache)"
(cd tools/dist/gomodproxy && GOMODCACHE=$tool_cache/mod GOTOOLCHAIN=local GOFLAGS=-mod=readonly \
	go build -o "$tool_cache/bin/gomodproxy" .)

echo "-- writing the proxy tree"
"$tool_cache/bin/gomodproxy" -dir "$module" -version "$version" -time "$stamp" -out "$outdir/proxy"

echo "== go: done"
(cd "$outdir" && find proxy -type f -printf '%s\t%p\n' | sort -k2)
