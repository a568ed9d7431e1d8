#!/usr/bin/env bash
# Runs the demo page's browser test against a real `floodgate serve` (memory://) on a
# free loopback port. Usage: run_e2e.sh FLOODGATE_BINARY WORK_DIR
# playwright-core comes from npm (no browser download: Debian's /usr/bin/chromium);
# the screenshot is left in WORK_DIR/demo.png as the test's artifact.
set -euo pipefail
binary=$1
work=$2
src=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$work"
cp "$src/package.json" "$src/package-lock.json" "$src/demo.test.mjs" "$work/"
if [ ! -d "$work/node_modules/playwright-core" ]; then
  (cd "$work" && npm ci --no-audit --no-fund --loglevel=error)
fi

log="$work/serve.log"
"$binary" serve --listen 127.0.0.1:0 --threads 2 >"$log" 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true' EXIT
port=""
for _ in $(seq 1 200); do  # bounded wait for the "listening on" line
  port=$(grep -o 'http://127.0.0.1:[0-9]*' "$log" | head -1 | sed 's/.*://' || true)
  [ -n "$port" ] && break
  kill -0 "$pid" 2>/dev/null || { cat "$log"; exit 1; }
  sleep 0.05
done
[ -n "$port" ] || { echo "floodgate serve did not start"; cat "$log"; exit 1; }

FLOODGATE_URL="http://127.0.0.1:$port" SCREENSHOT="$work/demo.png" node "$work/demo.test.mjs"
