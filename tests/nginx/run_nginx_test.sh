#!/usr/bin/env bash
# Debian's nginx in front of a real `floodgate serve`, asking /v1/authz with auth_request.
# examples/nginx/nginx.conf and a tiny upstream, all on free loopback ports.
# Checks: under the limit 200 with X-RateLimit-*; over it 429 with Retry-After; an
# in-flight limit whose leases nginx's post_action releases; a cost reserved at
# auth_request and settled by post_action at what the API reports.
# Usage: run_nginx_test.sh FLOODGATE_BINARY WORK_DIR
set -euo pipefail
binary=$1
work=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
rm -rf "$work" && mkdir -p "$work"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
fail() { echo "FAIL: $*"; echo "--- floodgate log"; cat "$work/floodgate.log" || true;
         echo "--- nginx log"; cat "$work/error.log" || true; exit 1; }
# Two distinct free ports, both bound at once while the kernel picks them (picked one at a
# time, the same port can come back twice: nginx then serves both blocks on one port).
free_ports() { python3 -c 'import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(*(x.getsockname()[1] for x in s))'; }

sed 's/^listen: .*/listen: 127.0.0.1:0/' "$root/examples/nginx/floodgate.yaml" > "$work/floodgate.yaml"
"$binary" serve --config "$work/floodgate.yaml" --threads 2 > "$work/floodgate.log" 2>&1 &
pids+=($!)
fg_port=""
for _ in $(seq 1 1200); do  # bounded wait for the "listening on" line
  fg_port=$(grep -o 'http://127.0.0.1:[0-9]*' "$work/floodgate.log" | head -1 | sed 's/.*://' || true)
  [ -n "$fg_port" ] && break
  sleep 0.05
done
[ -n "$fg_port" ] || fail "floodgate serve did not start"

read -r port upstream < <(free_ports)
sed -e "s|@PREFIX@|$work|g" -e "s|@FLOODGATE@|127.0.0.1:$fg_port|g" -e "s|@PORT@|$port|g" \
    -e "s|@UPSTREAM_PORT@|$upstream|g" "$root/examples/nginx/nginx.conf" > "$work/nginx.conf"
nginx -p "$work" -c "$work/nginx.conf" -e "$work/error.log" &
pids+=($!)
for _ in $(seq 1 1200); do
  curl -s -o /dev/null "http://127.0.0.1:$port/health-of-nginx" 2>/dev/null && break
  sleep 0.05
done
# The probe above used one of the 3 requests the policy allows; start from a clean
# slate by asking from a different client address.
client=(-H "X-Forwarded-For: 203.0.113.9")

# Request number $1 through nginx: sets $status and $out, headers in $work/h$1.
request() {
  out=$(curl -s -D "$work/h$1" "${client[@]}" "http://127.0.0.1:$port/api/items")
  status=$(head -1 "$work/h$1" | awk '{print $2}')
}

for i in 1 2 3; do
  request "$i"
  [ "$status" = 200 ] || fail "request $i: status $status, wanted 200"
  [ "$out" = "hello from the api" ] || fail "request $i: body '$out'"
  grep -qi '^X-RateLimit-Limit: 3' "$work/h$i" || fail "request $i: no X-RateLimit-Limit: 3"
  grep -qi "^X-RateLimit-Remaining: $((3 - i))" "$work/h$i" || fail "request $i: wrong X-RateLimit-Remaining"
  grep -qi '^RateLimit-Policy: "api";q=3;w=3600' "$work/h$i" || fail "request $i: no RateLimit-Policy"
done
request 4
[ "$status" = 429 ] || fail "request 4: status $status, wanted 429"
[ "$out" = '{"status": 429, "code": "rate_limit:exceeded"}' ] || fail "request 4: body '$out'"
grep -qiE '^Retry-After: [1-9][0-9]*' "$work/h4" || fail "request 4: no Retry-After"
grep -qi '^X-RateLimit-Remaining: 0' "$work/h4" || fail "request 4: no X-RateLimit-Remaining: 0"
echo "nginx auth_request: 3 x 200 with X-RateLimit-*, then 429 with $(grep -i '^Retry-After' "$work/h4" | tr -d '\r')"

# An in-flight limit (concurrency:1, lease 10 min) whose lease nginx's post_action hands
# back once each response is done (docs/leases.md, "Behind nginx or Envoy").
export_status() {
  curl -s -o /dev/null -w '%{http_code}' "${client[@]}" "http://127.0.0.1:$port/exports/$1"
}
# The release lands just after the client has its answer (post_action runs after the
# response): wait for it by asking again (bounded: a minute, a guard against a hang).
eventually() {
  local want=$1; shift
  for _ in $(seq 1 1200); do [ "$("$@")" = "$want" ] && return 0; sleep 0.05; done
  return 1
}
[ "$(export_status first)" = 200 ] || fail "the first export was not admitted"
# Without the release, the only lease would stay held for 10 minutes.
eventually 200 export_status second || fail "the first export's lease never came back"
# floodgate's /v1/authz as nginx calls it for the same client takes the lease (once the
# second export's release has landed).
lease=""
for _ in $(seq 1 1200); do
  lease=$(curl -s -D - -o /dev/null "${client[@]}" -H "X-Original-URI: /exports/direct" \
               "http://127.0.0.1:$fg_port/v1/authz" |
          grep -i '^X-RateLimit-Lease:' | awk '{print $2}' | tr -d '\r' || true)
  [ -n "$lease" ] && break
  sleep 0.05
done
[ -n "$lease" ] || fail "floodgate never gave the lease to a direct /v1/authz"
# Held by that lease, the limit denies through nginx.
[ "$(export_status held)" = 429 ] || fail "an export was admitted while the only lease was held"
released=$(curl -s -o /dev/null -w '%{http_code}' -X POST -H "X-RateLimit-Lease: $lease" \
               "http://127.0.0.1:$fg_port/v1/release")
[ "$released" = 204 ] || fail "the release hook answered $released"
[ "$(export_status after)" = 200 ] || fail "the export after the release was not admitted"
echo "nginx post_action: every lease handed back; a held lease denies through nginx (429)"

# cost_from_response: each /llm request reserves 5 of 20 tokens an hour; post_action
# settles it at the 2 the API reports (X-Tokens-Used).
llm_remaining=$(curl -s -D - -o /dev/null "${client[@]}" "http://127.0.0.1:$port/llm/complete" |
                grep -i '^X-RateLimit-Remaining:' | awk '{print $2}' | tr -d '\r' || true)
[ "$llm_remaining" = 15 ] || fail "the /llm request did not reserve the estimate: remaining '$llm_remaining'"
# floodgate's own view of the key /v1/authz used (rule llm, identified by IP), peeked.
tokens_left() {
  curl -s -X POST "http://127.0.0.1:$fg_port/v1/check" -d \
    '{"items":[{"key":"llm|{ip=203.0.113.9}","policy":"sliding_log:20/1h","cost":0}]}' |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["items"][0]["remaining"])'
}
# Unsettled, 15 would stay left until the hold ends; settled at 2, 18 are.
eventually 18 tokens_left || fail "the /llm reservation was never settled at 2 (left: $(tokens_left))"
echo "nginx post_action: an /llm request reserved 5 tokens and was settled at the 2 it used"
