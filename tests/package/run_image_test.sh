#!/usr/bin/env bash
# The container image (`make image`): built from scratch with podman, it serves as non-root.
#
# Builds the image with scripts/build-image.sh into a podman store of its own under WORK_DIR
# (vfs: no overlay mounts needed; removed at the end), runs `floodgate serve` in it as this
# machine runs containers (runc, cgroupfs, host network, host ulimits), and checks /healthz
# answers, a decision comes back (allowed, then denied), the process is not root, and, with
# examples/envoy's RLS config mounted, gRPC health says SERVING (when PYTHONPATH has the
# tests' generated health stubs); then upstream's mode: the image run plainly with upstream's
# Redis variables stops (never memory:// in silence), and /bin/ratelimit (as a command and as
# the entrypoint) starts as envoyproxy/ratelimit on a redis-server of the test's: /healthcheck,
# /rlconfig, /json sharing one count, statsd over UDP (upstream's default) with upstream's
# names. Prints the image size and the build time.
# Usage: run_image_test.sh FLOODGATE_BINARY WORK_DIR
set -euo pipefail
binary=$1
work=$2
source_dir=$(cd "$(dirname "$0")/../.." && pwd)
rm -rf "$work" && mkdir -p "$work"
printf '[containers]\ndefault_ulimits = []\n' > "$work/containers.conf"
export CONTAINERS_CONF=$work/containers.conf
export PODMAN_ARGS="--root $work/storage --runroot $work/run --storage-driver vfs --runtime runc --cgroup-manager=cgroupfs"
read -r -a podman_args <<< "$PODMAN_ARGS"
podman() { command podman "${podman_args[@]}" "$@"; }
name=floodgate-image-test-$$
redis_pid=""
cleanup() {
  podman rm -f "$name" "$name-rl1" "$name-rl2" > /dev/null 2>&1 || true
  [ -z "$redis_pid" ] || kill "$redis_pid" 2> /dev/null || true
  podman rmi -f floodgate:test > /dev/null 2>&1 || true
  rm -rf "$work/storage" "$work/run" 2>/dev/null || true
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; podman logs "$name" 2>&1 | tail -20 || true; exit 1; }

start=$(date +%s%N)
PODMAN_ARGS=$PODMAN_ARGS "$source_dir/scripts/build-image.sh" "$binary" "$work/image" floodgate:test
echo "image built in $((($(date +%s%N) - start) / 1000000)) ms"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
port=$(free_port)
grpc_port=$(free_port)
podman run -d --name "$name" --network host --ulimit host \
  -v "$source_dir/examples/envoy/ratelimit:/srv/ratelimit:ro" -e RUNTIME_ROOT=/srv/ratelimit \
  floodgate:test serve --config /etc/floodgate/floodgate.yaml --listen "127.0.0.1:$port" \
  --grpc-listen "127.0.0.1:$grpc_port" --threads 1 > /dev/null
url="http://127.0.0.1:$port"
for _ in $(seq 1 1200); do
  curl -sf "$url/healthz" > /dev/null 2>&1 && break
  [ "$(podman inspect -f '{{.State.Running}}' "$name")" = true ] || fail "the container exited"
  sleep 0.05
done
[ "$(curl -s "$url/healthz")" = ok ] || fail "/healthz: $(curl -s "$url/healthz")"

check() { curl -s -X POST "$url/v1/check" -d '{"key":"k","policy":"fixed_window:1/1h"}'; }
first=$(check)
second=$(check)
echo "$first" | grep -q '"allowed":true' || fail "the first request of 1/1h should be allowed: $first"
echo "$second" | grep -q '"allowed":false' || fail "the second request of 1/1h should be denied: $second"
# A calendar window reads the image's zone database (an absent zone is refused).
calendar=$(curl -s -X POST "$url/v1/check" \
  -d '{"key":"c","policy":"fixed_window:5/1mo,tz=America/New_York"}')
echo "$calendar" | grep -q '"allowed":true' || fail "a tz=America/New_York window: $calendar"

pid=$(podman inspect -f '{{.State.Pid}}' "$name")
uid=$(awk '/^Uid:/ {print $2}' "/proc/$pid/status")
[ "$uid" = 65532 ] || fail "the process inside runs as uid $uid, wanted 65532 (not root)"
podman logs "$name" 2>&1 | grep -q "listening on http://127.0.0.1:$port" || fail "no start line in the log"

if [ -n "${PYTHONPATH:-}" ]; then
  status=$(/usr/bin/python3 - "$grpc_port" <<'PY'
import sys, grpc
from grpc_health_check import health_pb2
channel = grpc.insecure_channel(f"127.0.0.1:{sys.argv[1]}")
check = channel.unary_unary("/grpc.health.v1.Health/Check",
                            request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
                            response_deserializer=health_pb2.HealthCheckResponse.FromString)
print(health_pb2.HealthCheckResponse.ServingStatus.Name(
    check(health_pb2.HealthCheckRequest(), timeout=60).status))
PY
  ) || fail "gRPC health check"
  [ "$status" = SERVING ] || fail "gRPC health: $status"
  echo "gRPC health: $status"
else
  echo "gRPC health: not checked (no generated Python stubs on PYTHONPATH)"
fi

# ---- upstream's mode ----
podman rm -f "$name" > /dev/null
redis_port=$(free_port)
redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no \
  > "$work/redis.log" 2>&1 &
redis_pid=$!
for _ in $(seq 1 1200); do  # bounded wait for an event, as every wait here
  redis-cli -p "$redis_port" ping 2> /dev/null | grep -q PONG && break
  sleep 0.05
done
# Plainly (`serve` with the packaged memory:// config) with upstream's Redis variables: refused.
if timeout 60 podman "${podman_args[@]}" run --rm --network host -e REDIS_SOCKET_TYPE=tcp \
  -e REDIS_URL="127.0.0.1:$redis_port" floodgate:test > "$work/plain.log" 2>&1; then
  fail "the image run plainly with REDIS_URL should refuse to start: $(cat "$work/plain.log")"
fi
grep -q "is set (envoyproxy/ratelimit's Redis settings) but the store is" "$work/plain.log" ||
  fail "the refusal should name the conflict: $(cat "$work/plain.log")"
# /bin/ratelimit, upstream's docker-compose-example.yml environment with the ports moved (and on
# loopback), twice: as the command, and as the entrypoint.
upstream_env=(-e LOG_LEVEL=debug -e REDIS_SOCKET_TYPE=tcp
  -e REDIS_URL="127.0.0.1:$redis_port" -e RUNTIME_ROOT=/data -e RUNTIME_SUBDIRECTORY=ratelimit
  -e RUNTIME_WATCH_ROOT=false -e CONFIG_TYPE=FILE -e CONFIG_GRPC_XDS_NODE_ID=test-node-id
  -e CONFIG_GRPC_XDS_SERVER_URL=ratelimit-xds-config-server:18000
  -e HOST=127.0.0.1 -e GRPC_HOST=127.0.0.1 -e DEBUG_HOST=127.0.0.1
  -v "$source_dir/examples/envoy/ratelimit/config:/data/ratelimit/config:ro")
http1=$(free_port) grpc1=$(free_port) debug1=$(free_port)
http2=$(free_port) grpc2=$(free_port) debug2=$(free_port)
# The first replica sends statsd (USE_STATSD=true, upstream's default; over UDP) to a socket
# of the test's, flushing every second; the listener keeps what it receives until it has seen
# the hits of the rule, at most 30 s.
statsd_port=$(python3 -c 'import socket; s=socket.socket(type=socket.SOCK_DGRAM); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
python3 - "$statsd_port" "$work/statsd.txt" <<'LISTEN' &
import socket, sys, time
sock = socket.socket(type=socket.SOCK_DGRAM)
sock.bind(("127.0.0.1", int(sys.argv[1])))
sock.settimeout(1.0)
seen, end = b"", time.monotonic() + 30
while time.monotonic() < end and b".edge.remote_address.total_hits:" not in seen:
    try:
        seen += sock.recv(65536) + b"\n"
    except socket.timeout:
        pass
open(sys.argv[2], "wb").write(seen)
LISTEN
statsd_listener=$!
podman run -d --name "$name-rl1" --network host "${upstream_env[@]}" -e PORT="$http1" \
  -e GRPC_PORT="$grpc1" -e DEBUG_PORT="$debug1" -e STATSD_PROTOCOL=udp \
  -e STATSD_HOST=127.0.0.1 -e STATSD_PORT="$statsd_port" -e STATS_FLUSH_INTERVAL=1s \
  floodgate:test /bin/ratelimit > /dev/null
podman run -d --name "$name-rl2" --network host "${upstream_env[@]}" -e USE_STATSD=false \
  -e PORT="$http2" -e GRPC_PORT="$grpc2" -e DEBUG_PORT="$debug2" --entrypoint /bin/ratelimit \
  floodgate:test > /dev/null
for container in "$name-rl1:$http1" "$name-rl2:$http2"; do
  for _ in $(seq 1 1200); do
    curl -sf "http://127.0.0.1:${container##*:}/healthcheck" > /dev/null 2>&1 && break
    [ "$(podman inspect -f '{{.State.Running}}' "${container%%:*}")" = true ] ||
      { podman logs "${container%%:*}" 2>&1 | tail -5; fail "${container%%:*} exited"; }
    sleep 0.05
  done
  [ "$(curl -s "http://127.0.0.1:${container##*:}/healthcheck")" = OK ] ||
    fail "/healthcheck of ${container%%:*}"
done
rlconfig=$(curl -s "http://127.0.0.1:$debug1/rlconfig")
echo "$rlconfig" | grep -qx "edge.remote_address: unit=MINUTE requests_per_unit=10, shadow_mode: false, quota_mode: false" ||
  fail "/rlconfig: $rlconfig"
# 10 a minute for one address, over both replicas on one Redis: 10 admitted in all. The window
# is the clock's minute: a round that began in one minute and ended in another is not judged
# (however long its requests took); the next round asks for another address, a count of its
# own (bounded: 3 rounds).
judged=""
for round in 1 2 3; do
  minute=$(($(date +%s) / 60))
  admitted=0
  for i in $(seq 1 14); do
    port=$http1
    [ $((i % 2)) = 0 ] && port=$http2
    code=$(curl -s -o /dev/null -w '%{http_code}' -X POST "http://127.0.0.1:$port/json" \
      -d '{"domain":"edge","descriptors":[{"entries":[{"key":"remote_address","value":"192.0.2.'"$round"'"}]}]}')
    [ "$code" = 200 ] && admitted=$((admitted + 1))
    [ "$code" = 200 ] || [ "$code" = 429 ] || fail "/json answered $code"
  done
  if [ $(($(date +%s) / 60)) = "$minute" ]; then judged=1; break; fi
  echo "round $round crossed a minute's end: not judged"
done
[ -n "$judged" ] || fail "every round crossed a minute's end"
[ "$admitted" = 10 ] || fail "two replicas admitted $admitted of 14, wanted 10 (the limit, shared)"
echo "upstream's mode: /bin/ratelimit as command and entrypoint, 10 of 14 admitted across two"
wait "$statsd_listener"
grep -Eq '^ratelimit\.service\.rate_limit\.edge\.remote_address\.total_hits:[0-9]+\|c$' \
  "$work/statsd.txt" || fail "no statsd total_hits from the first replica: $(head -c 2000 "$work/statsd.txt")"
grep -Eq '^ratelimit\.service\.rate_limit\.edge\.remote_address\.(within|over)_limit:[0-9]+\|c$' \
  "$work/statsd.txt" || fail "no statsd within/over_limit: $(head -c 2000 "$work/statsd.txt")"
echo "statsd over UDP: upstream's names from the first replica"
echo "ok"
