#!/usr/bin/env bash
# The container image (`make image`): built from scratch with podman, it serves as non-root.
#
# Builds the image with scripts/build-image.sh into a podman store of its own under WORK_DIR
# (vfs: no overlay mounts needed; removed at the end), runs `floodgate serve` in it as this
# machine runs containers (runc, cgroupfs, host network, host ulimits), and checks /healthz
# answers, a decision comes back (allowed, then denied), the process is not root, and, with
# examples/envoy's RLS config mounted, gRPC health says SERVING (when PYTHONPATH has the
# tests' generated health stubs); prints the image size and the build time.
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
cleanup() {
  podman rm -f "$name" > /dev/null 2>&1 || true
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
    check(health_pb2.HealthCheckRequest(), timeout=5).status))
PY
  ) || fail "gRPC health check"
  [ "$status" = SERVING ] || fail "gRPC health: $status"
  echo "gRPC health: $status"
else
  echo "gRPC health: not checked (no generated Python stubs on PYTHONPATH)"
fi
echo "ok"
