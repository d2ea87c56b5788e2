#!/usr/bin/env bash
# Scenario 1: disk full and file size limit.
#
# 1a  `fill rlimit`: a child pushes under a soft RLIMIT_FSIZE until a push
#     fails (EFBIG, with SIGXFSZ ignored), then raises the limit back and
#     pushes again on the same handle. Two sizes: 256 KiB, where the WAL hits
#     the limit, and 4.5 MiB, past the first automatic checkpoint, where the
#     database file hits it first (the checkpoint fails) and then the WAL.
# 1b  `fill disk` on a 2 MiB tmpfs: the child writes a 512 KiB filler file,
#     pushes until the disk is full (ENOSPC), deletes the filler and pushes
#     again on the same handle. Deleting the filler must leave room for the
#     checkpoint that copies the WAL's tasks into the database (at the
#     close, or at the parent's first write): with a 256 KiB filler, the
#     160 or so tasks of 1,000 bytes that fit in the WAL need more than
#     that, the disk stays full once the fault is "lifted", and every
#     write fails (TQ_ERR_IO) though all the tasks are there.
#
# Each time the parent process reopens the file and checks exactly the
# acknowledged tasks are there, byte for byte, and then `sqlcheck` (the
# system SQLite, another process) runs integrity_check.
source "$(dirname "$0")/lib.sh"

DIR=$OUT/s1
mkdir -p "$DIR"

# run_fill NAME MODE DIR SIZE PAYLOAD: one run of `fill` and the integrity
# check after it; records the verdict.
run_fill() {
    local name=$1 mode=$2 dir=$3 size=$4 payload=$5
    local log=$DIR/${name// /_}.log
    rm -f "$dir/fill.db" "$dir/fill.db-wal" "$dir/fill.db-shm" "$dir/filler"
    echo "\$ fill $mode $dir $size $payload"
    "$BIN/fill" "$mode" "$dir" "$size" "$payload" >"$log" 2>&1
    local rc=$?
    sed 's/^/  /' "$log"
    local status
    status=$(sed -n 's/.*returned \(TQ_[A-Z_]*\) (-\{0,1\}[0-9]*): .*/\1/p' "$log" | head -n 1)
    if [ -n "$status" ] && [ "$status" != TQ_ERR_IO ]; then
        finding "$name" "the first failed push returned $status, not TQ_ERR_IO (log: $log)"
    fi
    if [ $rc -ne 0 ]; then
        verdict FAIL "$name" "fill exited with status $rc (log: $log)"
        finding "$name" "$(grep -m 1 FAIL "$log") (reproduce: $BIN/fill $mode DIR $size $payload)"
        return
    fi
    "$BIN/sqlcheck" "$dir/fill.db" >"$log.sqlcheck" 2>&1
    rc=$?
    sed 's/^/  sqlcheck: /' "$log.sqlcheck"
    if [ $rc -ne 0 ]; then
        verdict FAIL "$name" "integrity_check failed (log: $log.sqlcheck)"
        finding "$name" "integrity_check failed after the fault: $(head -n 3 "$log.sqlcheck")"
        return
    fi
    verdict PASS "$name" "$status on the failed push; acknowledged tasks intact; handle usable once the fault was lifted"
}

scenario_1a() {
    section "Scenario 1a: file size limit (RLIMIT_FSIZE)"
    local hard
    hard=$(ulimit -H -f)
    # ulimit -f counts 1024-byte blocks.
    if [ "$hard" != unlimited ] && [ "$hard" -lt $((5 * 1024)) ]; then
        verdict SKIP "1a" "the hard RLIMIT_FSIZE ($hard KiB) is below the limits this test sets"
        return
    fi
    run_fill "1a limit: WAL" rlimit "$DIR" $((256 * 1024)) 1000
    run_fill "1a limit: database then WAL" rlimit "$DIR" $((4608 * 1024)) 3000
}

scenario_1b() {
    section "Scenario 1b: disk full (2 MiB tmpfs)"
    local mnt=$DIR/tmpfs
    mkdir -p "$mnt"
    mountpoint -q "$mnt" && umount "$mnt" # left over by an interrupted run
    if [ "$(id -u)" -ne 0 ]; then
        verdict SKIP "1b" "mounting a tmpfs needs root"
        return
    fi
    local error
    if ! error=$(mount -t tmpfs -o size=2m tmpfs "$mnt" 2>&1); then
        verdict SKIP "1b" "mount -t tmpfs -o size=2m tmpfs $mnt was refused: ${error:-no message}"
        return
    fi
    trap 'umount "$mnt" 2>/dev/null' EXIT
    run_fill "1b disk full" disk "$mnt" $((512 * 1024)) 1000
    umount "$mnt"
    trap - EXIT
}

scenario_1a
scenario_1b
