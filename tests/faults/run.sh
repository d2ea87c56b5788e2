#!/usr/bin/env bash
# Runs every fault scenario and prints the summary; the last line is
# "N passed, N failed", counting scenarios. Exit status 1 when any failed.
#
#   OUT=... BIN=... TQ_LIBDIR=... bash run.sh [1|2|3 ...]
#
# (the Makefile sets the variables; the arguments pick scenarios).
source "$(dirname "$0")/lib.sh"
here=$(dirname "$0")

rm -f "$RESULTS" "$FINDINGS"
touch "$RESULTS" "$FINDINGS"
scenarios=("$@")
[ ${#scenarios[@]} -gt 0 ] || scenarios=(1 2 3)

start=$(date +%s)
for n in "${scenarios[@]}"; do
    t0=$(date +%s)
    bash "$here/scenario$n.sh"
    echo "(scenario $n took $(($(date +%s) - t0)) s)"
done

section "Summary"
cat "$RESULTS"
if [ -s "$FINDINGS" ]; then
    echo
    echo "Findings ($FINDINGS):"
    sed 's/^/  /' "$FINDINGS"
fi
passed=$(grep -c '^PASS ' "$RESULTS")
failed=$(grep -c '^FAIL ' "$RESULTS")
skipped=$(grep -c '^SKIP ' "$RESULTS")
echo
echo "all scenarios took $(($(date +%s) - start)) s; $skipped skipped (reasons above)"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
