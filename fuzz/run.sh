#!/usr/bin/env bash
# Fuzzes tq: replays each target's saved corpus, then fuzzes it for a while.
#
#   bash fuzz/run.sh [SECONDS]
#
# SECONDS (or the TQ_FUZZ_SECONDS environment variable; the argument wins)
# is the fuzzing time per target, default 60. The two targets run side by
# side, one per core, so the fuzzing phase takes SECONDS of wall time plus
# the corpus replay. Exits non-zero if any input crashes, times out (10 s)
# or exhausts memory (2 GiB); the input is then saved under
# fuzz/artifacts/TARGET/ and printed in hex in the log. Needs the nightly
# toolchain (from rustup) and cargo-fuzz, which it installs when missing:
# without either, prints "skipping fuzzing: ..." and exits 0. See
# fuzz/README.md.
set -euo pipefail
cd "$(dirname "$0")"

seconds=${1:-${TQ_FUZZ_SECONDS:-60}}
if ! [[ $seconds =~ ^[1-9][0-9]*$ ]]; then
    echo "usage: bash fuzz/run.sh [SECONDS]  (a whole number of seconds, at least 1)" >&2
    exit 2
fi
targets=(api_model hostile_files)
# Per-target libFuzzer flags. api_model needs inputs of several operations
# from the start (libFuzzer otherwise grows the length limit from a few
# bytes, slowly): -len_control=0 lets it use up to -max_len at once, 512
# bytes (some 20 to 64 operations).
declare -A flags=([api_model]="-len_control=0 -max_len=512" [hostile_files]="")

if ! command -v rustup >/dev/null; then
    echo "skipping fuzzing: rustup is not installed (cargo-fuzz needs the nightly toolchain)"
    exit 0
fi
if ! rustup toolchain list | grep '^nightly' >/dev/null; then
    echo "skipping fuzzing: the nightly toolchain is not installed (rustup toolchain install nightly)"
    exit 0
fi
if ! cargo +nightly --version >/dev/null 2>&1; then
    echo "skipping fuzzing: the nightly toolchain does not run (cargo +nightly --version fails)"
    exit 0
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "cargo-fuzz is missing: installing it with cargo install cargo-fuzz --locked"
    if ! cargo install cargo-fuzz --locked; then
        echo "skipping fuzzing: cargo-fuzz could not be installed"
        exit 0
    fi
fi
cargo fuzz --version
rustc +nightly --version

start=$SECONDS
cargo +nightly fuzz build
echo "fuzz build: $((SECONDS - start)) s"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# New inputs go to a scratch corpus (listed first), so the saved corpus is
# replayed and read but never changed by a run. The inputs that found bugs
# (regressions/TARGET/, where there are any) are replayed with it.
start=$SECONDS
pids=()
for target in "${targets[@]}"; do
    mkdir -p "$work/$target" "corpus/$target" "artifacts/$target"
    ls "artifacts/$target" >"$work/$target.before"
    dirs=("$work/$target" "corpus/$target")
    if [[ -d regressions/$target ]]; then
        dirs+=("regressions/$target")
    fi
    # shellcheck disable=SC2086 # the flags are words
    cargo +nightly fuzz run "$target" "${dirs[@]}" -- \
        -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        ${flags[$target]} >"$work/$target.log" 2>&1 &
    pids+=($!)
done

failed=()
for i in "${!targets[@]}"; do
    target=${targets[$i]}
    if wait "${pids[$i]}"; then
        # The replay's line, the last status line and the speed.
        { grep -E '^#[0-9]+[[:space:]]+INITED' "$work/$target.log" || true; } | tail -n 1 |
            sed "s/^/$target: corpus replayed: /"
        { grep -E '^#[0-9]+[[:space:]]+DONE' "$work/$target.log" || true; } | tail -n 1 |
            sed "s/^/$target: /"
        { grep -E '^stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb)' \
            "$work/$target.log" || true; } | sed "s/^/$target: /"
    else
        failed+=("$target")
        echo "=== $target FAILED. What went wrong:"
        # A panic's message, a sanitizer's or libFuzzer's verdict.
        sed -n '/panicked at/,/^stack backtrace/p' "$work/$target.log" | head -n 60
        grep -E '^(==[0-9]+== ?ERROR|SUMMARY|ALARM|MS: )' "$work/$target.log" | head -n 20 || true
        echo "=== the end of $target's log:"
        tail -n 60 "$work/$target.log"
        for artifact in $(ls "artifacts/$target" | grep -vxF -f "$work/$target.before" || true); do
            echo "=== $target: fuzz/artifacts/$target/$artifact, in hex (xxd -r -p to restore):"
            od -An -tx1 -v "artifacts/$target/$artifact" | tr -d ' \n' | fold -w 64
            echo
        done
    fi
done
echo "fuzzing: $((SECONDS - start)) s for ${targets[*]} ($seconds s each, side by side)"

if ((${#failed[@]})); then
    echo "fuzzing failed: ${failed[*]} (see fuzz/README.md to reproduce and minimize)" >&2
    exit 1
fi
echo "fuzzing passed: ${targets[*]}"
