#!/usr/bin/env bash
# Runs one tree's tests (the command after --) while the next tree compiles at the lowest CPU priority.
#
# Usage: test-while-building.sh <build dir to compile> <jobs> -- <test command...>
# The tests spend most of their time waiting (on redis-servers, `floodgate serve`
# processes, timeouts): about 35 CPU-seconds for 85 s of `ctest -j2` in the default tree.
# The compiler runs under SCHED_IDLE, so it takes only the CPU the tests leave idle and
# a test that wakes up preempts it at once: the timing tests keep the machine they expect.
# The compiler's output goes to <build dir>/build.log, printed when it fails. Exits non-zero
# when either failed, after both have finished.
set -u

tree=$1
jobs=$2
shift 3

idle=()
if command -v chrt >/dev/null && chrt --idle 0 true 2>/dev/null; then
  idle=(chrt --idle 0)
else
  idle=(nice -n 19)
fi

echo "-- building $tree in the background (${idle[*]}; log: $tree/build.log)"
"${idle[@]}" cmake --build "$tree" -j "$jobs" >"$tree/build.log" 2>&1 &
build=$!

"$@"
tested=$?

wait "$build"
built=$?
if [ "$built" -ne 0 ]; then
  tail -n 60 "$tree/build.log"
  echo "-- building $tree failed (the whole log: $tree/build.log)"
else
  echo "-- $tree built"
fi
[ "$tested" -eq 0 ] && [ "$built" -eq 0 ]
