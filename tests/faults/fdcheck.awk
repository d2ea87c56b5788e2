# Checks an strace log of one process for how it opens, locks and closes a
# queue file DB and its companions (DB-wal, DB-shm, DB-journal).
#
#   strace -f -k -y -e trace=openat,open,close,fcntl -o LOG PROGRAM ...
#   awk -v db=/abs/DB -v connections=2 -v stacks=1 -f fdcheck.awk LOG
#
# Reports, per file: opens, closes, the most descriptors open at once, and
# the function that called open/close (with -k). Fails (exit 1) when:
#   - a file is closed while the process holds POSIX locks on it and another
#     descriptor of it stays open: the close drops every lock the process
#     holds on the file, including those another connection relies on;
#   - DB-shm is opened while already open (SQLite shares one per process);
#   - DB or DB-wal has more descriptors open at once than there are connections
#     (SQLite opens at most one of each per connection);
#   - a descriptor is left open at exit;
#   - with stacks=1: one of these files is opened or closed by anything but
#     SQLite's unix VFS (tq itself must never touch them).

function kind(path) {
    if (path == db) return "db"
    if (path == db "-wal") return "wal"
    if (path == db "-shm") return "shm"
    if (path == db "-journal") return "journal"
    return ""
}

function violation(text) {
    violations[++nviolations] = text
}

# The path in the first "<...>" after `prefix` in `line`, or "".
function annotated_path(line, prefix,    rest) {
    if (!match(line, prefix "[0-9]+<[^>]*>")) return ""
    rest = substr(line, RSTART, RLENGTH)
    sub(/^[^<]*</, "", rest)
    sub(/>$/, "", rest)
    return rest
}

# The first frame of the stack below libc: who made the call.
function caller(stack,    n, frames, i, name) {
    n = split(stack, frames, "\n")
    for (i = 1; i <= n; i++) {
        if (frames[i] ~ /libc\.so/ || frames[i] == "") continue
        name = frames[i]
        sub(/^[^(]*\(/, "", name)
        sub(/\+0x.*$/, "", name)
        return name
    }
    return "?"
}

# Byte-range locks held by the process on file kind k, as intervals
# [lo[k,i], hi[k,i]). F_UNLCK subtracts a range; a lock adds it.
function set_lock(k, start, len, type,    end, i, n, a, b, nlo, nhi, m) {
    end = (len == 0) ? 2^62 : start + len
    n = nlocks[k]; m = 0
    for (i = 1; i <= n; i++) {
        a = lo[k, i]; b = hi[k, i]
        if (b <= start || a >= end) { m++; nlo[m] = a; nhi[m] = b; continue }
        if (a < start) { m++; nlo[m] = a; nhi[m] = start }
        if (end < b) { m++; nlo[m] = end; nhi[m] = b }
    }
    if (type != "F_UNLCK") { m++; nlo[m] = start; nhi[m] = end }
    for (i = 1; i <= m; i++) { lo[k, i] = nlo[i]; hi[k, i] = nhi[i] }
    nlocks[k] = m
}

# Evaluates the syscall line `call` once its stack is complete.
function handle(call, stack,    path, k, fd, who, l_type, l_start, l_len) {
    if (call ~ /^(openat|open)\(/) {
        if (!match(call, /= [0-9]+<[^>]*>$/)) return
        path = substr(call, RSTART + 2)
        fd = path; sub(/<.*/, "", fd)
        sub(/^[0-9]+</, "", path); sub(/>$/, "", path)
        k = kind(path)
        if (k == "") return
        opens[k]++
        if (open_now[k] > 0) reopened[k]++
        if (k == "shm" && open_now[k] > 0)
            violation("DB-shm opened again (fd " fd ") while already open")
        open_now[k]++
        if (open_now[k] > max_open[k]) max_open[k] = open_now[k]
        fdkind[fd] = k
        if (stacks) {
            who = caller(stack)
            open_callers[k] = open_callers[k] (index(open_callers[k], who) ? "" : " " who)
            if (who != "robust_open")
                violation("DB" (k == "db" ? "" : "-" k) " opened by " who ", not by SQLite's VFS (robust_open)")
        }
    } else if (call ~ /^close\(/) {
        path = annotated_path(call, "^close\\(")
        k = kind(path)
        if (k == "") return
        fd = call; sub(/^close\(/, "", fd); sub(/<.*/, "", fd)
        closes[k]++
        if (nlocks[k] > 0 && open_now[k] > 1)
            violation("close of fd " fd " on DB" (k == "db" ? "" : "-" k) " while the process held " nlocks[k] \
                      " lock range(s) on it and " open_now[k] - 1 " other descriptor(s) stayed open: locks dropped")
        # The kernel drops every POSIX lock of the process on the file.
        nlocks[k] = 0
        open_now[k]--
        delete fdkind[fd]
        if (stacks) {
            who = caller(stack)
            close_callers[k] = close_callers[k] (index(close_callers[k], who) ? "" : " " who)
            if (who !~ /^(unix[A-Za-z]*|nolockClose|closePendingFds|robust_close)$/)
                violation("DB" (k == "db" ? "" : "-" k) " closed by " who ", not by SQLite's VFS")
        }
    } else if (call ~ /^fcntl\([0-9]+<[^>]*>, F_SETLKW?, / && call ~ /= 0$/) {
        path = annotated_path(call, "^fcntl\\(")
        k = kind(path)
        if (k == "") return
        l_type = call; sub(/.*l_type=/, "", l_type); sub(/,.*/, "", l_type)
        l_start = call; sub(/.*l_start=/, "", l_start); sub(/[,}].*/, "", l_start)
        l_len = call; sub(/.*l_len=/, "", l_len); sub(/[,}].*/, "", l_len)
        set_lock(k, l_start + 0, l_len + 0, l_type)
        locks_taken[k] += (l_type != "F_UNLCK")
    }
}

BEGIN {
    if (db == "") { print "fdcheck.awk: set -v db=PATH" > "/dev/stderr"; exit 2 }
    nviolations = 0
}

# Stack frames printed by -k follow their call.
/^ > / { stack = stack substr($0, 4) "\n"; next }

{
    if (pending != "") handle(pending, stack)
    line = $0
    sub(/^[0-9]+ +/, "", line) # the pid, printed with -f
    pending = line; stack = ""
}

END {
    if (pending != "") handle(pending, stack)
    printf "  %-10s %5s %6s %8s %9s  %s\n", "file", "opens", "closes", "max-open", "lock-ops", \
        (stacks ? "opened by / closed by" : "")
    split("db wal shm journal", kinds, " ")
    for (i = 1; i <= 4; i++) {
        k = kinds[i]
        if (!opens[k] && !closes[k]) continue
        printf "  %-10s %5d %6d %8d %9d  %s\n", (k == "db" ? "DB" : "DB-" k), opens[k], closes[k], max_open[k], \
            locks_taken[k], (stacks ? substr(open_callers[k], 2) " / " substr(close_callers[k], 2) : "")
        if (open_now[k] != 0)
            violation("DB" (k == "db" ? "" : "-" k) ": " open_now[k] " descriptor(s) still open at exit")
        if ((k == "db" || k == "wal") && max_open[k] > connections)
            violation("DB" (k == "db" ? "" : "-" k) ": " max_open[k] " descriptors open at once for " connections " connections")
    }
    for (i = 1; i <= nviolations; i++) print "  VIOLATION: " violations[i]
    exit nviolations > 0
}
