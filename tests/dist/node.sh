#!/usr/bin/env bash
# Installs the npm tarball from DISTDIR/node as a user would, in a new
# project with no Rust on PATH, and checks that it works there:
#
#   tests/dist/node.sh DISTDIR     (from the repository root; DISTDIR as make dist fills it)
#
# - `npm install` of the tarball, then an unrelated `npm install`, after
#   which node_modules/tq must still be a real folder;
# - examples/node/quickstart.js against a new queue file, without
#   TQ_LIBRARY, loading the package's own copy of libtq;
# - a strict TypeScript program against the installed declarations, with
#   TypeScript 5 and 7 and no @types/node.
# Prints the tarball's sizes and the install's time.
set -euo pipefail

die() {
  echo "tests/dist/node.sh: FAIL: $*" >&2
  exit 1
}

[ $# -eq 1 ] || die "usage: tests/dist/node.sh DISTDIR"
[ -f Cargo.toml ] && [ -f examples/node/quickstart.js ] || die "run it from the repository root"
repository=$PWD
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n1)
tarball=$(cd "$1" && pwd)/node/tq-$version.tgz
[ -f "$tarball" ] || die "no $tarball (tools/dist/node.sh LIBDIR $1/node makes it)"

# The compilers the TypeScript check runs, pinned.
TYPESCRIPT_5=5.9.3
TYPESCRIPT_7=7.0.2
NPM_FLAGS=(--no-audit --no-fund --prefer-offline)

# shellcheck source=tests/dist/no-rust.sh
. "$repository/tests/dist/no-rust.sh"
command -v npm >/dev/null || die "npm is not on PATH"
# The package must find its own copy of libtq.
unset TQ_LIBRARY

work=$(mktemp -d "${TMPDIR:-/tmp}/tq-test-dist-node.XXXXXX")
trap 'rm -rf "$work"' EXIT
project=$work/project
mkdir "$project"
cd "$project"
npm init -y >/dev/null

echo "== npm install $tarball (PATH without cargo or rustc)"
started=$(date +%s.%N)
npm install "${NPM_FLAGS[@]}" "$tarball"
install_seconds=$(echo "$started $(date +%s.%N)" | awk '{printf "%.1f", $2 - $1}')
bundled=$project/node_modules/tq/native/linux-x64/libtq.so
[ -f "$bundled" ] || die "the installed package has no $bundled"
install_scripts=$(node -p "const s = require('tq/package.json').scripts || {}; [s.preinstall, s.install, s.postinstall].filter(Boolean).join('; ')")
[ -z "$install_scripts" ] || die "the package has an install script: $install_scripts"
installed_kib=$(du -sk node_modules | cut -f1)

echo "== an unrelated npm install in the same project"
npm install "${NPM_FLAGS[@]}" is-number@7.0.0
[ -d node_modules/tq ] && [ ! -L node_modules/tq ] || die "node_modules/tq is no longer a real folder: $(ls -ld node_modules/tq)"

echo "== quick start, without TQ_LIBRARY"
cp "$repository/examples/node/quickstart.js" .
output=$(node quickstart.js "$work/jobs.db")
echo "$output"
expected='task 1: {"file":"a.mp4"}'
[ "$output" = "$expected" ] || die "the quick start printed '$output', not '$expected'"
loaded=$(node -p "require('tq').libraryPath")
[ "$loaded" = "$bundled" ] || die "tq loaded libtq from $loaded, not from the package's $bundled"

echo "== TypeScript $TYPESCRIPT_5 and $TYPESCRIPT_7 --strict against the installed declarations"
npm install "${NPM_FLAGS[@]}" --save-dev "typescript-5@npm:typescript@$TYPESCRIPT_5" "typescript-7@npm:typescript@$TYPESCRIPT_7"
[ ! -e node_modules/@types/node ] || die "@types/node is installed: the check would not show the declarations need none"
cat >tsconfig.json <<'JSON'
{
  "compilerOptions": { "strict": true, "noEmit": true, "target": "es2022", "module": "nodenext" },
  "files": ["quickstart.ts"]
}
JSON
cat >quickstart.ts <<'TS'
import * as tq from 'tq';

async function main(location: string): Promise<void> {
  await using queue: tq.Queue = await tq.open(location, { durability: 'normal' });
  const id: number = await queue.push(new TextEncoder().encode('{"file":"a.mp4"}'), { priority: 1 });
  using task: tq.Task | null = await queue.pull({ lease: 1000 });
  if (task !== null) await task.finish({ result: { id } });
  // @ts-expect-error: a location is a string (tq must not be typed as any)
  await tq.open(42);
}
main('jobs.db');
TS
for compiler in typescript-5 typescript-7; do
  node "node_modules/$compiler/bin/tsc" --version
  node "node_modules/$compiler/bin/tsc" --project tsconfig.json || die "$compiler refused the program"
done

unpacked_bytes=$(tar -tzvf "$tarball" | awk '{sum += $3} END {print sum}')
echo "== results"
echo "tarball: $(stat -c %s "$tarball") bytes packed, $unpacked_bytes bytes unpacked"
echo "installed: node_modules $installed_kib KiB (tq and koffi), of which node_modules/tq $(du -sk node_modules/tq | cut -f1) KiB"
echo "npm install of the tarball: $install_seconds s"
echo "tests/dist/node.sh: OK"
