#!/usr/bin/env bash
# `floodgate serve` as a process: refusing a bad config, SIGHUP reloads, /readyz, SIGTERM.
#
# A bad config refuses to start (file, line, reason); SIGHUP reloads a good file and keeps the old
# config when the new one is bad; /readyz follows the store; SIGTERM finishes and exits 0.
# Usage: run_serve_test.sh FLOODGATE_BINARY WORK_DIR
set -euo pipefail
binary=$1
work=$2
rm -rf "$work" && mkdir -p "$work"
pid=""
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null || true; }
trap cleanup EXIT
fail() { echo "FAIL: $*"; echo "--- log"; cat "$work/serve.log" 2>/dev/null || true; exit 1; }
wait_for() {  # bounded poll for a line in the log
  for _ in $(seq 1 200); do grep -q "$1" "$work/serve.log" && return 0; sleep 0.05; done
  fail "no \"$1\" in the log"
}

# 1. A bad config is refused at start with file, line and reason; exit 2.
printf 'listen: 127.0.0.1:0\nrules:\n  - name: a\n    policy: gcra:10/1s,burst=0\n' > "$work/bad.yaml"
set +e
"$binary" serve --config "$work/bad.yaml" > "$work/bad.out" 2>&1
code=$?
set -e
[ "$code" = 2 ] || fail "bad config: exit $code, wanted 2"
grep -q "bad.yaml:4: rules\[0\].policy: invalid policy" "$work/bad.out" || fail "bad config message: $(cat "$work/bad.out")"

# 2. Start with one rule; SIGHUP with a broken file keeps it; a good file replaces it.
printf 'listen: 127.0.0.1:0\nrules:\n  - name: one\n    policy: fixed_window:1/1h\n' > "$work/fg.yaml"
"$binary" serve --config "$work/fg.yaml" --threads 1 > "$work/serve.log" 2>&1 &
pid=$!
wait_for "listening on"
port=$(grep -o 'http://127.0.0.1:[0-9]*' "$work/serve.log" | head -1 | sed 's/.*://')
check() { curl -s -o /dev/null -w '%{http_code}' -X POST "http://127.0.0.1:$port/v1/check" -d "{\"key\":\"k\",\"rule\":\"$1\"}"; }
[ "$(check one)" = 200 ] || fail "rule one should exist"
[ "$(check two)" = 404 ] || fail "rule two should not exist yet"
printf 'rules:\n  - name: two\n    policy: nonsense\n' > "$work/fg.yaml"
kill -HUP "$pid"
wait_for "reload refused"
grep -q "fg.yaml:3: rules\[0\].policy" "$work/serve.log" || fail "the refused reload should name file and line"
[ "$(check one)" = 200 ] || fail "after a bad reload the old config must keep serving"
printf 'listen: 127.0.0.1:0\nrules:\n  - name: two\n    policy: fixed_window:1/1h\n' > "$work/fg.yaml"
kill -HUP "$pid"
wait_for "config reloaded"
[ "$(check two)" = 200 ] || fail "after a good reload rule two should exist"
[ "$(check one)" = 404 ] || fail "after a good reload rule one should be gone"
[ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/readyz")" = 200 ] || fail "readyz"

# 3. SIGTERM: stop accepting, finish, exit 0.
kill -TERM "$pid"
set +e
wait "$pid"
code=$?
set -e
pid=""
[ "$code" = 0 ] || fail "SIGTERM: exit $code, wanted 0"
grep -q "stopped" "$work/serve.log" || fail "no clean stop in the log"

# 4. /readyz answers 503 while the store is unreachable (Redis started, then killed).
redis_dir="$work/redis"
mkdir -p "$redis_dir"
rport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
redis-server --port "$rport" --bind 127.0.0.1 --dir "$redis_dir" --save '' --appendonly no > /dev/null 2>&1 &
rpid=$!
for _ in $(seq 1 200); do redis-cli -p "$rport" ping > /dev/null 2>&1 && break; sleep 0.05; done
: > "$work/serve.log"
"$binary" serve --listen 127.0.0.1:0 --store "redis://127.0.0.1:$rport" --threads 1 > "$work/serve.log" 2>&1 &
pid=$!
wait_for "listening on"
port=$(grep -o 'http://127.0.0.1:[0-9]*' "$work/serve.log" | head -1 | sed 's/.*://')
[ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/readyz")" = 200 ] || fail "readyz with redis up"
kill -9 "$rpid"; wait "$rpid" 2>/dev/null || true
[ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/readyz")" = 503 ] || fail "readyz with redis down"
body=$(curl -s -X POST "http://127.0.0.1:$port/v1/check" -d '{"key":"k","policy":"gcra:5/1s"}')
echo "$body" | grep -q '"degraded":true' || fail "a decision with redis down should be degraded: $body"
kill -TERM "$pid"; wait "$pid" 2>/dev/null || true; pid=""

# 5. The environment: FLOODGATE_LISTEN and FLOODGATE_STORE when no flag or file says,
# REDIS_URL when FLOODGATE_STORE is not set either; a flag beats the environment.
# Upstream's REDIS_URL beside a store given otherwise would be ignored: the start stops.
if FLOODGATE_STORE="memory://?max_keys=1000" REDIS_URL="redis://127.0.0.1:1" \
  timeout 10 "$binary" serve --listen 127.0.0.1:0 --threads 1 > "$work/serve.log" 2>&1; then
  fail "REDIS_URL beside FLOODGATE_STORE should stop the start"
fi
grep -q 'REDIS_URL is set .* but the store is FLOODGATE_STORE=memory://' "$work/serve.log" ||
  fail "the refusal should name REDIS_URL and the store: $(cat "$work/serve.log")"
lport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
: > "$work/serve.log"
FLOODGATE_LISTEN="127.0.0.1:$lport" FLOODGATE_STORE="memory://?max_keys=1000" \
  "$binary" serve --threads 1 > "$work/serve.log" 2>&1 &
pid=$!
wait_for "listening on"
grep -q "listening on http://127.0.0.1:$lport (store memory://" "$work/serve.log" || fail "FLOODGATE_LISTEN / FLOODGATE_STORE not used"
[ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$lport/healthz")" = 200 ] || fail "healthz on FLOODGATE_LISTEN"
kill -TERM "$pid"; wait "$pid" 2>/dev/null || true; pid=""
# REDIS_URL to a dead server: serve starts anyway (it connects in the background) and
# its log says where it is trying.
: > "$work/serve.log"
REDIS_URL="redis://127.0.0.1:$rport" "$binary" serve --listen 127.0.0.1:0 --threads 1 > "$work/serve.log" 2>&1 &
pid=$!
wait_for "redis unreachable at 127.0.0.1:$rport: connection refused"
grep -q "listening on http://127.0.0.1:[0-9]* (store redis://127.0.0.1:$rport/" "$work/serve.log" || fail "REDIS_URL not used"
kill -TERM "$pid"; wait "$pid" 2>/dev/null || true; pid=""
: > "$work/serve.log"
FLOODGATE_LISTEN="127.0.0.1:1" FLOODGATE_STORE="redis://127.0.0.1:$rport" \
  "$binary" serve --listen 127.0.0.1:0 --store memory:// --threads 1 > "$work/serve.log" 2>&1 &
pid=$!
wait_for "listening on"
grep -q "(store memory://" "$work/serve.log" || fail "--store should beat FLOODGATE_STORE"
grep -q "listening on http://127.0.0.1:1 " "$work/serve.log" && fail "--listen should beat FLOODGATE_LISTEN"

echo "serve: bad config refused, SIGHUP good/bad, SIGTERM exit 0, readyz 200/503, degraded answers, environment, start without redis"

