#!/usr/bin/env bash
# Scenario 2: I/O errors injected with strace into one queue cycle.
#
# For each SYSCALL:ERROR below and each N from 1 to the number of SYSCALL
# calls the cycle makes (open, push, pull, finish, close; counted in a run
# without injection), runs `cycle run` under
#     strace -f -e inject=SYSCALL:error=ERROR:when=OFFSET+N
# where OFFSET is the number of SYSCALL calls made before the cycle starts
# (the dynamic loader's), so the N-th call of the cycle itself fails. An
# entry ending in ":+" injects with when=OFFSET+N+ instead: that call and
# every later one fail, a disk that stays broken. Then, without strace,
# `cycle verify` reopens the file and checks that each call either succeeded
# with its effect present or failed with its effect absent (a call that
# failed while writing or syncing the WAL, i.e. in its commit, may go either
# way), and `sqlcheck` runs integrity_check and checks the holder rows. One
# scenario per entry; it passes when every N passes.
#
# Table columns: N (index among the cycle's SYSCALL calls), the call the
# (first) injection landed in and the file it hit, the first call that
# failed and its status, and the verdict.
#
# Then "2 holder identity": tq_open reads /proc to record which process
# holds leases; with that read failing (openat EIO), a live holder is run
# next to another process calling tq_recover, which must not take its task.
source "$(dirname "$0")/lib.sh"

COMBINATIONS=(
    fsync:EIO fdatasync:EIO
    pwrite64:EIO pwrite64:ENOSPC pwrite64:EACCES
    pread64:EIO
    openat:EIO openat:ENOSPC openat:EACCES
    ftruncate:EIO
    pwrite64:ENOSPC:+ fsync:EIO:+
)
TRACED=fsync,fdatasync,pwrite64,pread64,openat,ftruncate
# Seconds before a run counts as hung.
RUN_TIMEOUT=30

DIR=$OUT/s2
mkdir -p "$DIR"

# calls_before_and_during LOG SYSCALL: "OFFSET COUNT", the number of SYSCALL
# calls in LOG before the "begin open" marker and from it on.
calls_before_and_during() {
    awk -v sc="$2" '
        /write\(1<[^>]*>, "begin open/ { started = 1 }
        $2 ~ "^" sc "\\(" { if (started) during++; else before++ }
        END { printf "%d %d\n", before, during }' "$1"
}

# injected LOG: one line "CALL FILE" per injected call: the last
# "begin CALL" marker before it and the base name of the file its
# descriptor or path names ("-" when none).
injected() {
    awk '
        match($0, /"begin [a-z]+/) { call = substr($0, RSTART + 7, RLENGTH - 7) }
        /\(INJECTED\)/ {
            line = $0
            sub(/^[0-9]+ +/, "", line)
            file = "-"
            if (line ~ /^openat\(/ && match(line, /"[^"]*"/))
                file = substr(line, RSTART + 1, RLENGTH - 2)
            else if (match(line, /^[a-z0-9_]+\([0-9]+<[^>]*>/)) {
                file = substr(line, RSTART, RLENGTH - 1)
                sub(/^[^<]*</, "", file)
            }
            n = split(file, parts, "/")
            print call, parts[n]
        }' "$1"
}

# commit_failures SYSCALL INJECTED RESULTS: the calls (comma-separated, or
# "-") that failed and had a write or sync of the WAL injected: a failed
# commit, whose effect may or may not be there.
commit_failures() {
    [[ $1 =~ ^(pwrite64|fsync|fdatasync)$ ]] || { echo -; return; }
    awk 'FNR == NR { if ($2 ~ /-wal$/) wal[$1] = 1; next }
         $1 == "end" && $4 + 0 < 0 && ($2 in wal) { list = list (list ? "," : "") $2 }
         END { print (list ? list : "-") }' "$2" "$3"
}

# flush_failure SYSCALL STATUS FILE: whether STATUS is the documented one
# for a failed flush of the WAL after a commit at full durability.
flush_failure() {
    [[ $1 =~ ^(fsync|fdatasync)$ ]] && [ "$2" = TQ_ERR_UNKNOWN_OUTCOME ] && [[ $3 == *-wal* ]]
}

# first_failure RESULTS: "CALL STATUS" of the first call that returned a
# negative status, or "- -".
first_failure() {
    awk '$1 == "end" && $4 + 0 < 0 { print $2, $3; found = 1; exit }
         END { if (!found) print "-", "-" }' "$1"
}

# one_run SYSCALL ERROR OFFSET N PLUS: runs and checks one injection
# (PLUS "+": from the N-th call on), records its table row, returns 0 when
# it passed.
one_run() {
    local sc=$1 err=$2 offset=$3 n=$4 plus=$5
    local tag=$DIR/$sc-$err$plus-$n
    local db
    db=$(fresh_db "$DIR" q.db)
    local inject="$sc:error=$err:when=$((offset + n))$plus"
    local started=$SECONDS
    timeout -k 5 "$RUN_TIMEOUT" strace -f -y -o "$tag.strace" -e trace="$sc,write" -e inject="$inject" \
        "$BIN/cycle" run "$db" >"$tag.run" 2>"$tag.stderr"
    local rc=$? elapsed=$((SECONDS - started))

    local call file failed status unknown
    injected "$tag.strace" >"$tag.injected"
    read -r call file <"$tag.injected"
    [ -n "${call:-}" ] || { call="(none)"; file="-"; }
    [ "$(wc -l <"$tag.injected")" -le 1 ] || file="$file+"
    read -r failed status < <(first_failure "$tag.run")
    unknown=$(commit_failures "$sc" "$tag.injected" "$tag.run")

    # Unless the run crashed or hung, both checks run, so that every file is
    # integrity-checked; the first problem found gives the verdict.
    local verified=0 checked=0
    if [ "$rc" -lt 124 ] && [ $elapsed -lt $RUN_TIMEOUT ]; then
        "$BIN/cycle" verify "$db" "$tag.run" "$unknown" >"$tag.verify" 2>&1 || verified=$?
        "$BIN/sqlcheck" "$db" --holders >"$tag.sqlcheck" 2>&1 || checked=$?
    fi

    local verdict="ok" pass=0
    if [ "$rc" -eq 124 ] || [ $elapsed -ge $RUN_TIMEOUT ]; then
        verdict="HANG: no exit within ${RUN_TIMEOUT}s"
        pass=1
    elif grep -q '+++ killed by' "$tag.strace" || [ "$rc" -gt 128 ]; then
        verdict="CRASH: $(grep -o '+++ killed by [A-Z0-9]*' "$tag.strace" | head -n 1) (exit $rc)"
        pass=1
    elif [ "$rc" -ne 0 ]; then
        verdict="FAIL: cycle exited with status $rc: $(head -c 200 "$tag.stderr")"
        pass=1
    elif [ $verified -ne 0 ]; then
        verdict=$(sed -n 's/^verdict //p' "$tag.verify")
        [ -n "$verdict" ] || verdict="FAIL: verify: $(tail -n 1 "$tag.verify")"
        pass=1
    elif [ $checked -ne 0 ]; then
        verdict="FAIL: $(grep -v '^integrity_check: ok$' "$tag.sqlcheck" | head -n 1)"
        pass=1
    elif [ "$status" = TQ_ERR_INTERNAL ]; then
        verdict="FAIL: an injected $err came back as TQ_ERR_INTERNAL (documented as a bug in tq)"
        pass=1
    elif [ "$call" = "(none)" ]; then
        verdict="FAIL: nothing was injected (fewer calls than counted)"
        pass=1
    elif [ "$failed" = - ]; then
        verdict="ok (absorbed: every call succeeded)"
    elif [ "$status" != TQ_ERR_IO ] && ! flush_failure "$sc" "$status" "$file"; then
        # The contract allows any error status here; an I/O error reported
        # as something else is still worth a look.
        verdict="ok, but an injected $err came back as $status: $(grep -m 1 "^end $failed" "$tag.run" | cut -d' ' -f5-)"
        finding "2 $sc:$err N=$n" "surprising status: $verdict (injected in $call on $file)"
    elif [ "$unknown" != - ]; then
        verdict="ok (failed commit in $unknown; task $(sed -n 's/^observed //p' "$tag.verify"))"
    fi
    # A failed integrity check is worth saying even when another problem
    # gave the verdict.
    if [ $checked -ne 0 ] && [ $verified -ne 0 ]; then
        verdict="$verdict; and $(grep -v '^integrity_check: ok$' "$tag.sqlcheck" | head -n 1)"
    fi
    printf '%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n' \
        "$sc" "$err$plus" "$n" "$call" "$file" "$failed" "$status" "$verdict" >>"$DIR/table.tsv"
    if [ $pass -ne 0 ]; then
        finding "2 $sc:$err$plus N=$n" "$verdict; injected in $call on $file; reproduce:" \
            "strace -f -e inject=$inject cycle run DB >RES; cycle verify DB RES $unknown;" \
            "sqlcheck DB --holders (logs: $tag.*)"
    fi
    return $pass
}

# print_compact SYSCALL ERROR: that combination's rows of the table, with
# consecutive N whose other columns agree merged into one row "N1-N2".
print_compact() {
    awk -F'\t' -v sc="$1" -v err="$2" '
        function flush() {
            if (key == "") return
            range = (first == last) ? first : first "-" last
            split(key, f, "\t")
            printf "%-9s %-7s %-6s  %-6s %-14s %-6s %-22s  %s\n", sc, err, range, f[1], f[2], f[3], f[4], f[5]
        }
        $1 == sc && $2 == err {
            k = $4 "\t" $5 "\t" $6 "\t" $7 "\t" $8
            if (k == key && $3 == last + 1) { last = $3; next }
            flush(); key = k; first = $3; last = $3
        }
        END { flush() }' "$DIR/table.tsv"
}

# strace must know the name and be allowed to trace (ptrace may be denied
# in a container).
strace_usable() {
    strace -f -o /dev/null -e trace="$1" true >/dev/null 2>&1
}

# openat_index LOG PATTERN: the index, counted from the process start, of
# the first openat after "begin open" whose path matches PATTERN.
openat_index() {
    awk -v pattern="$2" '
        $2 ~ /^openat\(/ { n++; if (started && $0 ~ pattern) { print n; exit } }
        /write\(1<[^>]*>, "begin open/ { started = 1 }' "$1"
}

# hold_and_steal NAME [INJECT]: runs `holder hold` (under strace with the
# injection INJECT when given), and `holder steal` while it holds its task.
# Prints the outcome; returns 0 when nothing was stolen.
hold_and_steal() {
    local name=$1 inject=${2:-}
    local db tag=$DIR/holder-$name
    db=$(fresh_db "$DIR" holder.db)
    rm -f "$tag.fifo"
    mkfifo "$tag.fifo"
    if [ -n "$inject" ]; then
        strace -f -y -o "$tag.strace" -e trace=openat,write -e inject="$inject" \
            "$BIN/holder" hold "$db" <"$tag.fifo" >"$tag.hold" 2>&1 &
    else
        "$BIN/holder" hold "$db" <"$tag.fifo" >"$tag.hold" 2>&1 &
    fi
    local pid=$!
    exec 3>"$tag.fifo" # unblocks the holder's stdin; closed to let it finish
    for _ in $(seq 100); do
        grep -q '^holding' "$tag.hold" && break
        kill -0 $pid 2>/dev/null || break
        sleep 0.1
    done
    "$BIN/holder" steal "$db" >"$tag.steal" 2>&1
    # In a subshell that ignores SIGPIPE: if the holder died early, nobody
    # reads the fifo, and the write must fail rather than kill this script.
    (trap '' PIPE; echo go >&3) 2>/dev/null
    exec 3>&-
    wait $pid
    rm -f "$tag.fifo"
    local recovered pulled finished
    recovered=$(sed -n 's/^recovered \([0-9-]*\).*/\1/p' "$tag.steal")
    pulled=$(sed -n 's/^pull \([A-Z_]*\).*/\1/p' "$tag.steal")
    finished=$(sed -n 's/^end finish //p' "$tag.hold")
    echo "  $name: other process recovered ${recovered:-?}, its pull got ${pulled:-?};" \
        "the holder's finish got ${finished:-?}"
    [ "$recovered" = 0 ] && [ "$pulled" = TQ_EMPTY ] && [ "$finished" = TQ_OK ]
}

# Scenario "2 holder identity": tq_open reads /proc to record who it is
# (boot id, start time). When that read fails, is the holder still safe
# from another process's tq_recover?
holder_identity() {
    section "Scenario 2, holder identity: a failed /proc read in tq_open, then tq_recover in another process"
    strace -f -y -o "$DIR/holder-baseline.strace" -e trace=openat,write \
        "$BIN/holder" hold "$(fresh_db "$DIR" holder.db)" </dev/null >/dev/null 2>&1
    local failures=0 target index
    hold_and_steal control || failures=$((failures + 1))
    for target in boot_id /stat; do
        index=$(openat_index "$DIR/holder-baseline.strace" "$target")
        if [ -z "$index" ]; then
            echo "  tq_open does not open $target here"
            failures=$((failures + 1))
            continue
        fi
        if ! hold_and_steal "${target#/}" "openat:error=EIO:when=$index"; then
            failures=$((failures + 1))
            finding "2 holder identity" "with the open of $target failing (EIO) in tq_open, another" \
                "process's tq_recover took the live holder's leased task; reproduce: strace -f" \
                "-e inject=openat:error=EIO:when=$index $BIN/holder hold DB, then $BIN/holder steal DB" \
                "while it holds (files: $DIR/holder-${target#/}.*)"
        fi
    done
    if [ $failures -eq 0 ]; then
        verdict PASS "2 holder identity" "no live holder's task was recovered"
    else
        verdict FAIL "2 holder identity" "$failures of 3 runs let tq_recover take a live holder's task"
    fi
}

section "Scenario 2: I/O errors injected with strace"
if ! command -v strace >/dev/null; then
    verdict SKIP 2 "strace is not installed (Debian package: strace)"
    exit 0
fi
if ! strace_usable openat; then
    verdict SKIP 2 "strace cannot trace here: $(strace -o /dev/null true 2>&1 | head -n 1 | grep . || echo "strace -o /dev/null true failed")"
    exit 0
fi

db=$(fresh_db "$DIR" q.db)
rm -f "$DIR/table.tsv"
strace -f -y -o "$DIR/baseline.strace" -e trace="$TRACED,write" "$BIN/cycle" run "$db" >"$DIR/baseline.run"
echo "calls made by one cycle (open, push, pull, finish, close), from a run without injection:"
for sc in ${TRACED//,/ }; do
    read -r before during < <(calls_before_and_during "$DIR/baseline.strace" "$sc")
    printf '  %-10s %3d (after %d made before the cycle starts)\n' "$sc" "$during" "$before"
done
echo "N: index among the cycle's calls of that syscall; ERR+: that call and every later one fail;"
echo "in: the call the (first) injection landed in; file: the file it hit (+: more injections"
echo "followed); failed: the first call that returned an error. Full table: $DIR/table.tsv"
echo
printf '%-9s %-7s %-6s  %-6s %-14s %-6s %-22s  %s\n' syscall error N "in" file failed status verdict

for combination in "${COMBINATIONS[@]}"; do
    IFS=: read -r sc err plus <<<"$combination"
    name="2 $sc:$err$plus"
    if ! strace_usable "$sc"; then
        verdict SKIP "$name" "this strace does not know the system call $sc"
        continue
    fi
    read -r offset count < <(calls_before_and_during "$DIR/baseline.strace" "$sc")
    if [ "$count" -eq 0 ]; then
        verdict SKIP "$name" "the cycle makes no $sc call (SQLite's unix VFS syncs with fsync here)"
        continue
    fi
    failures=0
    for ((n = 1; n <= count; n++)); do
        one_run "$sc" "$err" "$offset" "$n" "$plus" || failures=$((failures + 1))
    done
    print_compact "$sc" "$err$plus"
    if [ $failures -eq 0 ]; then
        verdict PASS "$name" "$count injections, each checked"
    else
        verdict FAIL "$name" "$failures of $count injections failed"
    fi
done

holder_identity
