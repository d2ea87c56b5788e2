# Shared by the scenario scripts: where things are, and how a scenario
# records its verdict. Sourced, not run.
#
# Every scenario ends with exactly one call to `verdict`, which appends
# "PASS|FAIL|SKIP NAME: DETAIL" to $RESULTS; run.sh counts those lines.
# Findings worth a human's attention are also appended to $FINDINGS.

set -u

: "${OUT:?OUT must name the output directory}"
: "${BIN:?BIN must name the directory of the built drivers}"
RESULTS=$OUT/results.txt
FINDINGS=$OUT/findings.txt

# verdict PASS|FAIL|SKIP NAME DETAIL...
verdict() {
    local kind=$1 name=$2
    shift 2
    echo "$kind $name: $*" >>"$RESULTS"
    echo "--> $kind $name: $*"
}

# finding NAME TEXT...: something to report, whether or not it failed a check.
finding() {
    local name=$1
    shift
    echo "[$name] $*" >>"$FINDINGS"
}

# section TITLE: a header line in the log.
section() {
    echo
    echo "=== $* ==="
}

# fresh_db DIR NAME: removes any leftover queue file and its companions,
# prints the path.
fresh_db() {
    rm -f "$1/$2" "$1/$2-wal" "$1/$2-shm" "$1/$2-journal"
    echo "$1/$2"
}
