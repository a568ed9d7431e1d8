#!/usr/bin/env bash
# Runs the demo page's browser test against a real `floodgate serve` on a loopback port.
# The store is memory:// or a real redis-server started here (and stopped by its PID).
# Usage: run_e2e.sh FLOODGATE_BINARY WORK_DIR [memory|redis]
# playwright-core comes from npm (no browser download: Debian's /usr/bin/chromium);
# the screenshot is left in WORK_DIR/demo.png as the test's artifact.
set -euo pipefail
binary=$1
work=$2
store=${3:-memory}
src=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$work"
cp "$src/package.json" "$src/package-lock.json" "$src/demo.test.mjs" "$work/"
if [ ! -d "$work/node_modules/playwright-core" ]; then
  (cd "$work" && npm ci --no-audit --no-fund --loglevel=error)
fi

pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done' EXIT
store_args=()
expect_store=memory://
if [ "$store" = redis ]; then
  mkdir -p "$work/redis"
  # A free port is only free until someone takes it: tests running beside this one pick
  # ports too. So the redis-server started here must itself say it is ready (a PONG on
  # the port could come from another test's server); if it could not bind, it exits, and
  # another port is tried (bounded).
  redis_ready=""
  for _ in 1 2 3 4 5; do
    redis_port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no \
      --dir "$work/redis" >"$work/redis.log" 2>&1 &
    redis_pid=$!
    pids+=("$redis_pid")
    for _ in $(seq 1 1200); do  # bounded wait for it to be ready, or gone
      grep -q "Ready to accept connections" "$work/redis.log" && { redis_ready=1; break; }
      kill -0 "$redis_pid" 2>/dev/null || break
      sleep 0.05
    done
    [ -n "$redis_ready" ] && break
    kill "$redis_pid" 2>/dev/null || true
  done
  [ -n "$redis_ready" ] || { echo "redis-server did not start"; cat "$work/redis.log"; exit 1; }
  # A 60 s bound, not the 50 ms default: on a loaded machine a stall past a short timeout
  # is answered by on_error=local, whose own state admits a burst again (a degraded
  # answer, which the page counts apart): this test is about the page, and the store's
  # timeouts are tested by its own tests. Here the timeout only guards against a hang.
  store_args=(--store "redis://127.0.0.1:$redis_port?timeout=60s")
  expect_store=redis://
fi

log="$work/serve.log"
"$binary" serve --listen 127.0.0.1:0 --threads 2 "${store_args[@]}" >"$log" 2>&1 &
pid=$!
pids+=("$pid")
port=""
for _ in $(seq 1 1200); do  # bounded wait for the "listening on" line
  port=$(grep -o 'http://127.0.0.1:[0-9]*' "$log" | head -1 | sed 's/.*://' || true)
  [ -n "$port" ] && break
  kill -0 "$pid" 2>/dev/null || { cat "$log"; exit 1; }
  sleep 0.05
done
[ -n "$port" ] || { echo "floodgate serve did not start"; cat "$log"; exit 1; }
# serve listens before its store answers (lazy_connect: decisions meanwhile come from
# on_error, degraded); the page's exact counts need the store itself, so wait (bounded)
# until /readyz says it is connected.
ready=""
for _ in $(seq 1 1200); do
  curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && { ready=1; break; }
  sleep 0.05
done
[ -n "$ready" ] || { echo "floodgate serve never became ready"; cat "$log"; exit 1; }

FLOODGATE_URL="http://127.0.0.1:$port" SCREENSHOT="$work/demo.png" EXPECT_STORE="$expect_store" \
  node "$work/demo.test.mjs"
