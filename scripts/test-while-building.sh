#!/usr/bin/env bash
# Runs one tree's tests (the command after --) while the next tree compiles at the lowest CPU priority.
#
# Usage: test-while-building.sh <build dir to compile> <jobs> -- <test command...>
# The tests spend most of their time waiting (on redis-servers, `floodgate serve`
# processes, timeouts): the default tree's `ctest -j2` used 54 CPU-seconds of the 170 that
# two cores offer in its 85 s.
# The compiler runs under SCHED_IDLE, so it takes only the CPU the tests leave idle and
# a test that wakes up preempts it at once: the timing tests keep the machine they expect.
# Once the tests are done, the rest of the build goes back to normal priority where the
# system allows that (root, or RLIMIT_NICE), so that other work on a shared machine does
# not starve it. The compiler's output goes to <build dir>/build.log, printed when it
# fails. Exits non-zero when either failed, after both have finished.
set -u

tree=$1
jobs=$2
shift 3

if command -v chrt >/dev/null && chrt --idle 0 true 2>/dev/null; then
  idle=(chrt --idle 0)
  normal() { chrt --other --all-tasks --pid 0 "$1"; }
else
  idle=(nice -n 19)
  normal() { renice -n 0 -p "$1"; }
fi

# The build's processes, parents before children: a compiler ninja starts after ninja
# went back to normal priority inherits that.
descendants() {
  local child
  for child in $(pgrep -P "$1"); do
    echo "$child"
    descendants "$child"
  done
}

echo "-- building $tree in the background (${idle[*]}; log: $tree/build.log)"
"${idle[@]}" cmake --build "$tree" -j "$jobs" >"$tree/build.log" 2>&1 &
build=$!

"$@"
tested=$?

if kill -0 "$build" 2>/dev/null; then
  echo "-- tests done; $tree still building (now at normal priority where allowed)"
  for pid in "$build" $(descendants "$build"); do normal "$pid" >/dev/null 2>&1 || true; done
fi
wait "$build"
built=$?
if [ "$built" -ne 0 ]; then
  tail -n 60 "$tree/build.log"
  echo "-- building $tree failed (the whole log: $tree/build.log)"
else
  echo "-- $tree built"
fi
[ "$tested" -eq 0 ] && [ "$built" -eq 0 ]
