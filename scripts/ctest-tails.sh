#!/usr/bin/env bash
# Runs ctest with the arguments given. When a test failed, prints once more, after ctest's
# summary, what failed in each failed test and the end of its output, and exits with
# ctest's status.
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
  echo "-- ${name} failed (all of its output: $PWD/$log)"
  # A test's output in LastTest.log: after its "N/M Test: <name>" line, from the line after
  # "Output:" and its rule, up to "<end of output>".
  output=$(awk -v name="$name" '
    $0 ~ /^[0-9]+\/[0-9]+ Test: / && substr($0, index($0, ": ") + 2) == name { found = 1; next }
    found && /^Output:$/ { inside = 1; getline; next }
    inside && /^<end of output>$/ { exit }
    inside { print }
  ' "$log")
  # What failed, wherever it is in the output: gtest's failure messages (a failed assertion
  # starts with "<file>:<line>: Failure"), a sanitizer's report, an abort's reason. CI of stop
  # 46 cut the assertion's message off, since a shard's last lines are its other cases.
  echo "-- ${name}: what failed"
  grep -E -A 12 -e ': Failure$' -e '^==[0-9]+==(ERROR|WARNING)' -e 'WARNING: ThreadSanitizer' \
    -e 'runtime error:' -e 'terminate called' -e 'Check failed' -e '^\[  FAILED  \]' \
    <<<"$output" | head -n 120
  echo "-- ${name}: its last lines"
  tail -n 30 <<<"$output"
done <"$failed"
exit "$status"
