#!/usr/bin/env bash
# Runs ctest with the arguments given. When a test failed, prints the end of each failed
# test's output once more, after ctest's summary, and exits with ctest's status.
#
# Why: --output-on-failure prints a failed test's output where the test ended, among the
# other tests' progress. A log read from its end (CI's excerpt, a terminal's scrollback) then
# loses what matters most, the end of that output: a sanitizer's report, an abort's message.
# CI of stop 45 showed only "rls_test.1 ... Subprocess aborted", its report cut away.
set -u

ctest "$@"
status=$?
[ "$status" -eq 0 ] && exit 0

failed=Testing/Temporary/LastTestsFailed.log  # "<number>:<name>" per failed test
log=Testing/Temporary/LastTest.log
[ -f "$failed" ] && [ -f "$log" ] || exit "$status"
while IFS=: read -r _ name; do
  echo "-- the end of ${name}'s output (all of it: $PWD/$log)"
  # A test's output in LastTest.log: after its "N/M Test: <name>" line, from the line after
  # "Output:" and its rule, up to "<end of output>".
  awk -v name="$name" '
    $0 ~ /^[0-9]+\/[0-9]+ Test: / && substr($0, index($0, ": ") + 2) == name { found = 1; next }
    found && /^Output:$/ { inside = 1; getline; next }
    inside && /^<end of output>$/ { exit }
    inside { print }
  ' "$log" | tail -n 80
done <"$failed"
exit "$status"
