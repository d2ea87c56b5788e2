#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for the tests, on 127.0.0.1 only.
#
#   tests/postgres/cluster.sh start DIR   initdb in DIR, start the server on a
#                                         free port, print its URL
#   tests/postgres/cluster.sh restart DIR [fast|immediate]
#                                         restart it on the same port and
#                                         settings (`immediate` is a crash:
#                                         the server recovers from its WAL)
#   tests/postgres/cluster.sh stop DIR    stop it and remove DIR
#
# PostgreSQL refuses to run as root: as root, the server runs as the user
# `postgres` (Debian's package creates it), else as the user `tqpg`, made
# here when missing. PG_BIN overrides where initdb and pg_ctl are found.
# pg_stat_statements is loaded, planning counted, so that tests can see
# how often tq's statements are planned and run.
set -euo pipefail

usage="usage: cluster.sh start|restart|stop DIR"
command=${1:?$usage}
dir=${2:?$usage}

find_bin() {
    if [ -n "${PG_BIN:-}" ]; then echo "$PG_BIN"; return; fi
    local newest
    newest=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
    if [ -n "$newest" ]; then echo "$newest"; return; fi
    dirname "$(command -v pg_ctl)"
}
bin=$(find_bin)
if [ ! -x "$bin/pg_ctl" ]; then
    echo "cluster.sh: no PostgreSQL server binaries found (install the postgresql package)" >&2
    exit 1
fi

as_server() {
    if [ "$(id -u)" -eq 0 ]; then
        runuser -u "$user" -- "$@"
    else
        "$@"
    fi
}
user=$(id -un)
if [ "$(id -u)" -eq 0 ]; then
    if id postgres >/dev/null 2>&1; then
        user=postgres
    else
        id tqpg >/dev/null 2>&1 || useradd --system --no-create-home tqpg
        user=tqpg
    fi
fi

case "$command" in
start)
    rm -rf "$dir"
    mkdir -p "$dir"
    [ "$(id -u)" -eq 0 ] && chown "$user" "$dir"
    as_server "$bin/initdb" -D "$dir/data" --auth=trust -U postgres >"$dir/initdb.log" 2>&1 || {
        cat "$dir/initdb.log" >&2
        exit 1
    }
    # A free port: ask the kernel for one, then hand it to the server.
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    as_server "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
        -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c fsync=on -c max_connections=300 \
        -c shared_preload_libraries=pg_stat_statements -c pg_stat_statements.track_planning=on" \
        start >/dev/null || {
        cat "$dir/server.log" >&2
        exit 1
    }
    echo "postgres://postgres@127.0.0.1:$port/postgres"
    ;;
restart)
    mode=${3:-fast}
    if [ "$mode" != fast ] && [ "$mode" != immediate ]; then
        echo "cluster.sh: the restart mode is fast or immediate" >&2
        exit 2
    fi
    # pg_ctl restart starts the server again with the options it was
    # started with (recorded in postmaster.opts): same port, same settings.
    as_server "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -m "$mode" -w -t 60 \
        restart >/dev/null || {
        tail -n 20 "$dir/server.log" >&2
        exit 1
    }
    ;;
stop)
    if [ -d "$dir/data" ]; then
        as_server "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
    fi
    rm -rf "$dir"
    ;;
*)
    echo "$usage" >&2
    exit 2
    ;;
esac
