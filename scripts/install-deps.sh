#!/usr/bin/env bash
# Installs the Debian packages floodgate needs, only those missing.
# `apt-get update` runs only when something is missing, so a ready machine does no network I/O.
set -euo pipefail

packages=(
  # build
  build-essential cmake ninja-build pkg-config
  # the lld linker: links the test binaries 3-5x faster than GNU ld (cmake/build_speed.cmake)
  lld
  # libraries (every dependency is a Debian package)
  libabsl-dev libfmt-dev libspdlog-dev libcli11-dev nlohmann-json3-dev libsimdjson-dev
  libboost-dev libhiredis-dev libyaml-cpp-dev libssl-dev
  # the zone database calendar windows (tz=ZONE) read through abseil: /usr/share/zoneinfo
  tzdata
  # Envoy's rate limit service (gRPC): the C++ library, protoc and its gRPC plugins, and
  # the Python client the tests speak the wire format with (run by /usr/bin/python3)
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc
  python3-grpcio python3-protobuf
  # tests and benchmarks (clang + its runtime: the libFuzzer harnesses; gnuplot: charts)
  libgtest-dev libgmock-dev libbenchmark-dev clang libclang-rt-dev gnuplot-nox
  # real servers the tests and benchmarks start themselves, and the bench driver
  redis-server redis-tools python3 wrk curl openssl
  # the .deb and the container image (make package, make image and their tests):
  # systemd-analyze verifies the unit; podman builds and runs the image with runc;
  # mmdebstrap (gpg: the archive's keys) builds the root the .deb is booted in with
  # systemd-nspawn (systemd-container)
  systemd podman runc mmdebstrap gpg systemd-container
)
# Programs that may come from more than one package: installed only when the command
# is missing (a machine with another nginx build or its own Node keeps it).
commands=(
  "nginx:nginx-light"        # nginx with auth_request, for the reverse-proxy test
  "chromium:chromium"        # the demo page's browser test (never a downloaded browser)
  "node:nodejs"
  "npm:npm"
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
for entry in "${commands[@]}"; do
  command -v "${entry%%:*}" >/dev/null 2>&1 || missing+=("${entry#*:}")
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "install-deps: installing ${missing[*]}" >&2
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
# Debian starts the daemons it installs; the tests start their own on free ports.
for service in nginx redis-server; do
  if command -v systemctl >/dev/null 2>&1; then
    "${sudo_cmd[@]}" systemctl disable --now "$service" >/dev/null 2>&1 || true
  fi
done
