#!/usr/bin/env bash
# Installs the Debian packages floodgate needs, only those missing. `apt-get update`
# runs only when something is missing, so a ready machine does no network I/O.
#   scripts/install-deps.sh            build + test dependencies
set -euo pipefail

packages=(
  # build
  build-essential cmake ninja-build pkg-config
  # libraries (see DEVELOPERS.md: every dependency is a Debian package)
  libabsl-dev libfmt-dev libspdlog-dev libcli11-dev nlohmann-json3-dev libsimdjson-dev
  libboost-dev libhiredis-dev
  # tests and benchmarks
  libgtest-dev libgmock-dev libbenchmark-dev
  # real servers the tests and benchmarks start themselves, and the bench driver
  redis-server redis-tools python3
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
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
