#!/usr/bin/env bash
# Installs the Python wheel of tools/dist/python.sh as a user would, in
# fresh virtual environments on a PATH without cargo or rustc, and runs
# examples/python/quickstart.py against a fresh queue file:
#   1. pip install DISTDIR/python/tq-<v>-py3-none-manylinux_*.whl
#   2. pip install --no-index --find-links DISTDIR/python --only-binary tq tq
#      (the folder as a local index: the wheel must win over the sdist)
# Prints the packages' sizes and each install's time.
#
# Usage: tests/dist/python.sh DISTDIR   (from the repository root)
set -euo pipefail

fail() {
    echo "tests/dist/python.sh: FAIL: $*" >&2
    exit 1
}

[[ $# -eq 1 ]] || fail "usage: tests/dist/python.sh DISTDIR"
[[ -f examples/python/quickstart.py ]] || fail "run it from the repository root"
packages=$(cd "$1/python" && pwd) || fail "$1/python is not a folder"
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n1)
wheels=("$packages"/tq-"$version"-py3-none-manylinux*.whl)
[[ ${#wheels[@]} -eq 1 && -f ${wheels[0]} ]] ||
    fail "expected one manylinux wheel of tq $version in $packages"
wheel=${wheels[0]}
sdist="$packages/tq-$version.tar.gz"
[[ -f $sdist ]] || fail "$sdist not found"

# shellcheck source=tests/dist/no-rust.sh
. tests/dist/no-rust.sh
python=$(command -v "${PYTHON:-python3}") || fail "no ${PYTHON:-python3} on PATH"
# Nothing may reach the package but the wheel: no library named, no source
# tree, no other wheel folder.
unset TQ_LIBRARY PYTHONPATH PIP_FIND_LINKS PIP_INDEX_URL PIP_EXTRA_INDEX_URL

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp examples/python/quickstart.py "$work/"

seconds_since() { # seconds_since START: the time since $EPOCHREALTIME was START
    awk -v start="$1" -v end="$EPOCHREALTIME" 'BEGIN { printf "%.1f", end - start }'
}

# check_install NAME: runs the quick start with the venv NAME's Python and
# checks that the package loaded the library inside itself.
check_install() {
    local venv="$work/$1" output site loaded
    output=$(cd "$work" && "$venv/bin/python" quickstart.py "$work/$1.db") ||
        fail "$1: the quick start failed"
    [[ $output == "task 1: {'file': 'a.mp4'}" ]] || fail "$1: the quick start printed: $output"
    site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["platlib"])')
    loaded=$(cd "$work" && "$venv/bin/python" -c 'import tq; print(tq.library_path)')
    [[ $loaded == "$site/tq/libtq.so" ]] || fail "$1: tq loaded $loaded, not the library in the package"
    grep -q '^Tag: py3-none-manylinux' "$site"/tq-"$version".dist-info/WHEEL ||
        fail "$1: what was installed is not the manylinux wheel"
    echo "$1: the quick start printed: $output"
}

echo "wheel: $(basename "$wheel"), $(stat -c %s "$wheel") bytes"
echo "sdist: $(basename "$sdist"), $(stat -c %s "$sdist") bytes"

"$python" -m venv "$work/from-file"
start=$EPOCHREALTIME
"$work/from-file/bin/python" -m pip install --quiet --disable-pip-version-check --no-input "$wheel" ||
    fail "pip install of $wheel failed"
echo "from-file: pip install $(basename "$wheel") took $(seconds_since "$start") s"
check_install from-file

"$python" -m venv "$work/from-folder"
start=$EPOCHREALTIME
"$work/from-folder/bin/python" -m pip install --quiet --disable-pip-version-check --no-input \
    --no-index --find-links "$packages" --only-binary tq tq ||
    fail "pip install from the folder $packages failed"
echo "from-folder: pip install --no-index --find-links $1/python tq took $(seconds_since "$start") s"
check_install from-folder

echo "tests/dist/python.sh: 2 passed, 0 failed"
