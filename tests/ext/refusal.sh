#!/bin/sh
# The system's sqlite3 shell refuses to load tq's extension when its SQLite
# is older than 3.51.3, with tq's reason.
#   refusal.sh EXTENSION
set -eu
extension=$1
if ! command -v sqlite3 >/dev/null; then
    echo "skipped the sqlite3 shell's refusal: there is no sqlite3 command"
    exit 0
fi
version=$(sqlite3 --version | cut -d' ' -f1)
number=$(echo "$version" | awk -F. '{ printf "%d", $1 * 1000000 + $2 * 1000 + $3 }')
if [ "$number" -ge 3051003 ]; then
    echo "skipped the sqlite3 shell's refusal: its SQLite ($version) is 3.51.3 or later"
    exit 0
fi
if output=$(sqlite3 :memory: ".load $extension" 2>&1); then
    echo "refusal.sh: sqlite3 $version loaded tq's extension" >&2
    exit 1
fi
case $output in
*"too old: tq needs 3.51.3 or later"*) echo "ok: sqlite3 $version refused the extension: $output" ;;
*) echo "refusal.sh: sqlite3 $version refused the extension without tq's reason: $output" >&2; exit 1 ;;
esac
