#!/usr/bin/env bash
# Scenario 3: process hygiene.
#
# 3a  `hygiene` (two handles on one file in one process, a short cycle)
#     under strace -k; fdcheck.awk checks every open, lock and close of the
#     file and its companions. The same program with --bad, which opens and
#     closes DB-shm itself, is a negative control: the checks must flag it.
# 3b  `both_sqlites`, linked with the system SQLite and libtq (both link
#     orders), uses each on its own file, interleaved; libtq.so must export
#     tq_* symbols only.
source "$(dirname "$0")/lib.sh"

: "${TQ_LIBDIR:?TQ_LIBDIR must name the directory of libtq.so}"
DIR=$OUT/s3
mkdir -p "$DIR"

# trace_hygiene TAG STACKS [--bad]: runs hygiene under strace and the checks
# on its log. Prints both; returns 0 when neither found a problem.
trace_hygiene() {
    local tag=$1 stacks=$2
    shift 2
    local db
    db=$(fresh_db "$DIR" hygiene.db)
    local k=()
    [ "$stacks" = 1 ] && k=(-k)
    strace -f "${k[@]}" -y -o "$DIR/$tag.strace" -e trace=openat,open,close,fcntl \
        "$BIN/hygiene" "$db" "$@" >"$DIR/$tag.out" 2>&1
    local rc=$?
    sed 's/^/  program: /' "$DIR/$tag.out"
    awk -v db="$db" -v connections=2 -v stacks="$stacks" -f "$(dirname "$0")/fdcheck.awk" "$DIR/$tag.strace" \
        >"$DIR/$tag.check"
    local check=$?
    cat "$DIR/$tag.check"
    [ $rc -eq 0 ] && [ $check -eq 0 ]
}

scenario_3a() {
    section "Scenario 3a: descriptors of the queue file, two handles in one process"
    if ! command -v strace >/dev/null; then
        verdict SKIP 3a "strace is not installed (Debian package: strace)"
        return
    fi
    if ! strace -f -o /dev/null -e trace=openat true >/dev/null 2>&1; then
        verdict SKIP 3a "strace cannot trace here: $(strace -o /dev/null true 2>&1 | head -n 1 | grep . || echo "strace -o /dev/null true failed")"
        return
    fi
    # -k needs an strace built with stack unwinding; without it, who opened
    # a file is not checked (said so below), the rest is.
    local stacks=1
    if ! strace -k -o /dev/null -e trace=getpid true >/dev/null 2>&1; then
        stacks=0
        echo "  note: this strace has no -k (stack traces): callers of open/close are not checked"
    fi
    echo "SQLite opens DB and DB-wal once per connection (two handles on one file share a writing"
    echo "and a reading connection, and SQLite defers closing a DB descriptor while the process"
    echo "holds locks on the file); DB-shm once per process. Checked: no close drops locks while"
    echo "another descriptor of the file stays open, DB-shm is never opened while open, at most two"
    echo "DB and two DB-wal descriptors, nothing left open, and every open/close comes from SQLite's"
    echo "unix VFS."
    echo "\$ strace -f -k -y -e trace=openat,open,close,fcntl hygiene DB"
    local good=0 control=0
    trace_hygiene hygiene "$stacks" || good=1
    echo "\$ strace -f -k -y -e trace=openat,open,close,fcntl hygiene DB --bad   (negative control)"
    if trace_hygiene hygiene-bad "$stacks" --bad; then
        control=1
        echo "  the negative control was NOT flagged: the checks cannot see the hazard"
    else
        echo "  (flagged, as it must be)"
    fi
    if [ $good -eq 0 ] && [ $control -eq 0 ]; then
        verdict PASS 3a "every open and close of the file by SQLite, no lock dropped; the control was flagged"
    elif [ $good -ne 0 ]; then
        verdict FAIL 3a "see the violations above (log: $DIR/hygiene.strace)"
        finding 3a "descriptor hygiene: $(grep -h -e VIOLATION -e FAIL "$DIR/hygiene.check" "$DIR/hygiene.out" | head -n 3)" \
            "reproduce: strace -f -k -y -e trace=openat,open,close,fcntl $BIN/hygiene DB"
    else
        verdict FAIL 3a "the negative control was not flagged"
    fi
}

scenario_3b() {
    section "Scenario 3b: the system SQLite and libtq in one program"
    local exported leaked
    exported=$(nm -D --defined-only "$TQ_LIBDIR/libtq.so" | awk '{ print $3 }')
    leaked=$(echo "$exported" | grep -v '^tq_' || true)
    echo "libtq.so exports $(echo "$exported" | grep -c '^tq_') tq_* symbols and $(echo -n "$leaked" | grep -c .) others"
    local failures=0 order
    [ -z "$leaked" ] || { echo "  exported besides tq_*: $(echo "$leaked" | head -n 5 | tr '\n' ' ')"; failures=1; }
    for order in sqlite_first tq_first; do
        echo "\$ both_sqlites_$order DIR   (linked $(tr '_' ' ' <<<"$order"))"
        ldd "$BIN/both_sqlites_$order" | grep -E 'libsqlite3|libtq' | sed 's/^\s*/  ldd: /'
        "$BIN/both_sqlites_$order" "$DIR" 2>&1 | sed 's/^/  /'
        [ "${PIPESTATUS[0]}" -eq 0 ] || failures=$((failures + 1))
    done
    if [ $failures -eq 0 ]; then
        verdict PASS 3b "system SQLite 3.40 and libtq's own SQLite side by side, both link orders"
    else
        verdict FAIL 3b "see above"
    fi
}

scenario_3a
scenario_3b
