#!/usr/bin/env bash
# Packs the Node.js binding as an npm tarball carrying the prebuilt libtq for
# linux-x64: OUTDIR/tq-VERSION.tgz, which installs with no script run and
# no Rust.
#
#   tools/dist/node.sh LIBDIR OUTDIR     (from the repository root)
#
# LIBDIR holds libtq.so.VERSION. The package's files are copied to a staging
# folder with the library as native/linux-x64/libtq.so (lib/native.js loads
# native/PLATFORM/libtq.so), and `npm pack` packs that folder; npm gives
# every entry the same time stamp, so the same inputs make the same tarball.
set -euo pipefail

die() {
  echo "tools/dist/node.sh: $*" >&2
  exit 1
}

[ $# -eq 2 ] || die "usage: tools/dist/node.sh LIBDIR OUTDIR"
libdir=$1
outdir=$2
[ -f Cargo.toml ] && [ -d bindings/node ] || die "run it from the repository root (no Cargo.toml or bindings/node in $PWD)"
command -v npm >/dev/null || die "npm is not on PATH"

version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n1)
[ -n "$version" ] || die "no version in Cargo.toml"
package_version=$(node -p "require('./bindings/node/package.json').version")
[ "$package_version" = "$version" ] ||
  die "bindings/node/package.json has version $package_version, Cargo.toml $version: make them agree"

library=$libdir/libtq.so.$version
[ -f "$library" ] || die "no $library"
# The folder name promises x86-64: ELF's e_machine (bytes 18-19, little-endian) is 0x3e for it.
machine=$(od -An -tx1 -j18 -N2 "$library" | tr -d ' \n')
[ "$(head -c4 "$library" | od -An -c | tr -d ' \n')" = '177ELF' ] && [ "$machine" = 3e00 ] ||
  die "$library is not an x86-64 ELF library (e_machine bytes: $machine)"

staging=$(mktemp -d "${TMPDIR:-/tmp}/tq-dist-node.XXXXXX")
trap 'rm -rf "$staging"' EXIT

echo "staging the files npm packs from bindings/node (package.json's \"files\") in $staging"
# npm lists them itself, so that package.json stays the one list of what the package holds.
files=$(cd bindings/node && npm pack --dry-run --json --ignore-scripts |
  node -e "for (const file of JSON.parse(require('fs').readFileSync(0, 'utf8'))[0].files) console.log(file.path)")
[ -n "$files" ] || die "npm pack --dry-run listed no files in bindings/node"
while IFS= read -r file; do
  mkdir -p "$staging/$(dirname "$file")"
  cp "bindings/node/$file" "$staging/$file"
done <<<"$files"
echo "bundling $library as native/linux-x64/libtq.so"
mkdir -p "$staging/native/linux-x64"
cp "$library" "$staging/native/linux-x64/libtq.so"

echo "emptying $outdir"
rm -rf "$outdir"
mkdir -p "$outdir"
outdir=$(cd "$outdir" && pwd)

echo "npm pack (no scripts run) into $outdir"
(cd "$staging" && npm pack --ignore-scripts --silent --pack-destination "$outdir" >/dev/null)
tarball=$outdir/tq-$version.tgz
[ -f "$tarball" ] || die "npm pack made no $tarball"
echo "packed $tarball ($(stat -c %s "$tarball") bytes):"
tar -tzvf "$tarball"
