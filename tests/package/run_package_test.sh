#!/usr/bin/env bash
# The .deb (`make package`): what it holds, its control data, the unit, the packaged binary.
#
# Builds the package with cpack from BUILD_DIR into WORK_DIR; checks `dpkg-deb -c` lists the
# binary, the unit and the config and no library or header, that Depends was computed from the
# shared libraries, the conffile and the maintainer scripts for the system user; that the unit
# passes `systemd-analyze verify` against the extracted tree; that the packaged binary runs,
# and that its `config check` accepts the shipped config and refuses a broken one by line.
# Usage: run_package_test.sh BUILD_DIR WORK_DIR VERSION
set -euo pipefail
build=$1
work=$2
version=$3
source_dir=$(cd "$(dirname "$0")/../.." && pwd)
rm -rf "$work" && mkdir -p "$work"
fail() { echo "FAIL: $*"; exit 1; }

start=$(date +%s%N)
cpack --config "$build/CPackConfig.cmake" -B "$work" > "$work/cpack.log" 2>&1 ||
  { cat "$work/cpack.log"; fail "cpack"; }
deb="$work/floodgate_${version}_$(dpkg --print-architecture).deb"
[ -f "$deb" ] || fail "no $deb: $(ls "$work")"
echo "package: $(basename "$deb") $(stat -c %s "$deb") bytes, built in $((($(date +%s%N) - start) / 1000000)) ms"

# 1. The files promised, and none of the library's.
dpkg-deb -c "$deb" > "$work/contents"
for path in ./usr/bin/floodgate ./lib/systemd/system/floodgate.service \
            ./etc/floodgate/floodgate.yaml ./usr/share/doc/floodgate/README.md; do
  grep -q " $path\$" "$work/contents" || fail "$path is not in the package: $(cat "$work/contents")"
done
! grep -E '\.a$|/include/|/cmake/' "$work/contents" || fail "the library's files are in the package"

# 2. Control data: Depends from dpkg-shlibdeps (libc6 and the libraries the binary links),
# the conffile, the scripts that create the user and remove it on purge.
depends=$(dpkg-deb -f "$deb" Depends)
for dep in adduser tzdata libc6 'libgrpc++' libssl3 libstdc++6; do
  echo "$depends" | grep -q "$dep" || fail "Depends lacks $dep: $depends"
done
dpkg-deb -e "$deb" "$work/control"
grep -qx /etc/floodgate/floodgate.yaml "$work/control/conffiles" || fail "the config is not a conffile"
grep -q 'adduser --system' "$work/control/postinst" || fail "postinst creates no system user"
grep -q 'purge' "$work/control/postrm" && grep -q 'deluser --system' "$work/control/postrm" ||
  fail "postrm does not remove the user on purge"
for script in postinst prerm postrm; do
  sh -n "$work/control/$script" || fail "$script: syntax"
done

# 3. The unit, against the tree it ships in (its ExecStart binary must exist there).
root="$work/root"
dpkg-deb -x "$deb" "$root"
unit="$root/lib/systemd/system/floodgate.service"
for setting in NoNewPrivileges=yes ProtectSystem=strict PrivateTmp=yes 'CapabilityBoundingSet=$' \
               'RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX' User=floodgate \
               "ExecReload=/bin/sh -c 'kill -s HUP \\\$\\\$MAINPID'"; do
  grep -q "^$setting" "$unit" || fail "the unit lacks $setting"
done
# The tree needs the targets the unit names (multi-user.target...): the host's units, beside.
cp -rn /lib/systemd/system/. "$root/lib/systemd/system/"
SYSTEMD_LOG_LEVEL=info systemd-analyze verify --root="$root" --man=no \
  /lib/systemd/system/floodgate.service > "$work/verify.log" 2>&1 ||
  { cat "$work/verify.log"; fail "systemd-analyze verify"; }
! grep -v '^$' "$work/verify.log" || fail "systemd-analyze verify warned"
# systemd's own score of the hardening: 0 (locked down) to 10; 1.4 when this was written.
systemd-analyze security --offline=yes --threshold=20 --root="$root" \
  /lib/systemd/system/floodgate.service > "$work/security.log" 2>&1 ||
  { cat "$work/security.log"; fail "the unit's exposure is above 2.0"; }
grep -o 'Overall exposure level.*' "$work/security.log"

# 4. The packaged (stripped) binary runs, and validates configs without starting anything.
binary="$root/usr/bin/floodgate"
"$binary" --version > "$work/version"
head -1 "$work/version" | grep -q "^floodgate $version (git " || fail "--version: $(cat "$work/version")"
if revision=$(git -C "$source_dir" rev-parse --short=12 HEAD 2>/dev/null); then
  head -1 "$work/version" | grep -q "(git $revision" ||
    fail "--version should name the checkout's revision $revision: $(head -1 "$work/version")"
fi
grep -q '^redis: RESP2; .*TLS.*unix sockets.*Cluster.*Sentinel' "$work/version" ||
  fail "--version should list the Redis features: $(cat "$work/version")"
"$binary" config check "$root/etc/floodgate/floodgate.yaml" > "$work/check.out" 2>&1 ||
  fail "config check refuses the shipped config: $(cat "$work/check.out")"
sed 's/policy: sliding_log:5\/15m/policy: sliding_log:0\/15m/' \
  "$root/etc/floodgate/floodgate.yaml" > "$work/broken.yaml"
cmp -s "$root/etc/floodgate/floodgate.yaml" "$work/broken.yaml" && fail "could not break the config"
line=$(grep -n 'sliding_log:0/15m' "$work/broken.yaml" | cut -d: -f1)
set +e
"$binary" config check "$work/broken.yaml" > "$work/broken.out" 2>&1
code=$?
set -e
[ "$code" = 2 ] || fail "config check of a broken file: exit $code, wanted 2"
grep -q "broken.yaml:$line: rules\[0\].policy" "$work/broken.out" ||
  fail "config check should name the file and line $line: $(cat "$work/broken.out")"

# 5. config check of upstream's RUNTIME_ROOT layout: the example's, then a broken copy.
"$binary" config check --runtime-root "$source_dir/examples/envoy/ratelimit" \
  > "$work/rls.out" 2>&1 || fail "config check refuses examples/envoy: $(cat "$work/rls.out")"
grep -q 'config: ok (1 domain)' "$work/rls.out" || fail "config check of the RLS directory: $(cat "$work/rls.out")"
mkdir -p "$work/runtime/config"
printf 'domain: edge\ndescriptors:\n  - key: a\n    rate_limit: {unit: FORTNIGHT, requests_per_unit: 1}\n' \
  > "$work/runtime/config/limits.yaml"
set +e
RUNTIME_ROOT=$work/runtime "$binary" config check "$root/etc/floodgate/floodgate.yaml" \
  > "$work/rls-broken.out" 2>&1
code=$?
set -e
[ "$code" = 2 ] || fail "config check of a broken RLS directory: exit $code, wanted 2"
grep -q "limits.yaml:4: invalid rate limit unit 'FORTNIGHT'" "$work/rls-broken.out" ||
  fail "the RLS error should name file and line: $(cat "$work/rls-broken.out")"
echo "ok"
