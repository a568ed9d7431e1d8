#!/usr/bin/env bash
# The .deb as an operator runs it: installed, reloaded, upgraded and purged under a real systemd.
#
# A minimal Debian root (mmdebstrap --variant=minbase, the host's release, with systemd and the
# package's Depends) is built once into BUILD_DIR/systemd-root and reused while its key (recipe,
# release, mirror, Depends with versions) matches; otherwise it is built anew. Each run boots it
# with systemd-nspawn (--volatile=overlay: the cached root is never written), unregistered since
# the host's PID 1 is not systemd, and runs commands inside with nsenter. Checked: dpkg -i
# enables and starts the unit; it runs as the floodgate user with no capabilities, NoNewPrivs,
# seccomp and a read-only /; /healthz and a rule's limit answer; `systemctl reload` applies a
# changed limit, and fails on a broken file while the old config keeps answering; journalctl
# has the logs; upgrades keep the edited conffile, restart the service, and leave a disabled
# unit disabled and stopped; stop; dpkg -P removes the unit, the user and /etc/floodgate, also
# once adduser is gone. Skips (exit 77) without root or a reachable mirror.
# Usage: run_systemd_test.sh BUILD_DIR WORK_DIR VERSION
set -euo pipefail
build=$(cd "$1" && pwd)
work=$2
version=$3
fail() { echo "FAIL: $*"; exit 1; }
skip() { echo "SKIP: $*"; exit 77; }
now_ms() { echo $(($(date +%s%N) / 1000000)); }
start_ms=$(now_ms)

[ "$(id -u)" = 0 ] || skip "needs root (mmdebstrap, systemd-nspawn, nsenter)"
for tool in mmdebstrap systemd-nspawn nsenter unshare curl cpack dpkg-deb findmnt; do
  command -v "$tool" > /dev/null || skip "no $tool (scripts/install-deps.sh installs it)"
done
# shellcheck source=/dev/null
. /etc/os-release
if [ "${ID:-}" != debian ] || [ -z "${VERSION_CODENAME:-}" ]; then skip "the host is not Debian"; fi
rm -rf "$work" && mkdir -p "$work/debs"
root="$build/systemd-root"

# Whatever this run started ends with it, however it ends: the root's build, the container,
# the cgroups it made.
builder=
nspawn=
init=
cgroups=()
cleanup() {
  local status=$? left=() pids
  set +e
  if [ -n "$builder" ] && kill -0 "$builder" 2> /dev/null; then
    kill -TERM "$builder" && wait "$builder"  # unshare --kill-child: all of the build ends
    rm -rf "$root.new"
  fi
  if [ -n "$nspawn" ] && kill -0 "$nspawn" 2> /dev/null; then
    kill -TERM "$nspawn"  # nspawn asks the container's systemd to power off
    for _ in $(seq 200); do kill -0 "$nspawn" 2> /dev/null || break; sleep 0.1; done
    if kill -0 "$nspawn" 2> /dev/null; then
      echo "the container did not power off in 20 s: killed"
      [ -n "$init" ] && kill -KILL "$init"  # its PID namespace's init: everything inside dies
      kill -KILL "$nspawn"
    fi
    wait "$nspawn" 2> /dev/null
  fi
  for dir in "${cgroups[@]}"; do
    mapfile -t pids < <(find "$dir" -name cgroup.procs -exec cat {} + 2> /dev/null)
    [ ${#pids[@]} -gt 0 ] && kill -KILL "${pids[@]}"
    find "$dir" -depth -type d -exec rmdir {} + 2> /dev/null
    [ -d "$dir" ] && left+=("the cgroup $dir")
  done
  grep -qF " $root" /proc/self/mountinfo && left+=("a mount in $root")
  if [ ${#left[@]} -gt 0 ]; then
    echo "FAIL: left behind: ${left[*]}"
    [ "$status" = 0 ] && exit 1
  fi
}
trap cleanup EXIT
# bash runs a trap only once the command in the foreground returns: the long ones run in the
# background under `wait`, which a signal interrupts.
trap 'exit 143' TERM INT

# 1. The package, and two newer builds of it for upgrades: the same files, the version bumped.
arch=$(dpkg --print-architecture)
cpack --config "$build/CPackConfig.cmake" -B "$work" > "$work/cpack.log" 2>&1 ||
  { cat "$work/cpack.log"; fail "cpack"; }
deb="$work/debs/floodgate_${version}_$arch.deb"
mv "$work/floodgate_${version}_$arch.deb" "$deb"
dpkg-deb -R "$deb" "$work/newer"
for newer in upgrade1 upgrade2; do
  sed -i "s/^Version: .*/Version: $version+$newer/" "$work/newer/DEBIAN/control"
  dpkg-deb -Znone -b "$work/newer" "$work/debs/floodgate_$version+${newer}_$arch.deb" > /dev/null
done

# 2. The root: built once, then reused while its key matches.
mirror=${FLOODGATE_DEBIAN_MIRROR:-http://deb.debian.org/debian}
# Depends' names without versions (the first of alternatives), beside what boots the system;
# apt inside mmdebstrap picks the package that provides a virtual one (libspdlog1.10-fmt9).
packages=systemd,systemd-sysv,dbus,$(dpkg-deb -f "$deb" Depends | tr ',' '\n' |
  sed 's/|.*//; s/(.*)//; s/ //g' | paste -sd, -)
# The key: what the root is built from, and Depends with its versions (a newer library than
# the cached root has builds it anew).
key="recipe=2 suite=$VERSION_CODENAME mirror=$mirror packages=$packages
depends=$(dpkg-deb -f "$deb" Depends)"
if [ ! -d "$root" ] || [ "$(cat "$build/systemd-root.key" 2> /dev/null)" != "$key" ]; then
  curl -fsS --max-time 20 -o /dev/null "$mirror/dists/$VERSION_CODENAME/Release" ||
    skip "no Debian mirror reachable at $mirror (FLOODGATE_DEBIAN_MIRROR sets another)"
  rm -rf "$root" "$root.new" "$build/systemd-root.key"
  built_ms=$(now_ms)
  # mmdebstrap rather than debootstrap: apt resolves and downloads, half debootstrap's CPU
  # time (45 s against 84 s for this root). In namespaces of its own: the mounts it makes
  # in the root while it builds, and its processes, end with it even when it is killed.
  timeout 600 unshare --mount --pid --fork --kill-child --mount-proc \
    mmdebstrap --variant=minbase --include="$packages" "$VERSION_CODENAME" "$root.new" \
    "$mirror" > "$work/mmdebstrap.log" 2>&1 &
  builder=$!
  wait "$builder" || { tail -20 "$work/mmdebstrap.log"; rm -rf "$root.new"; fail "mmdebstrap"; }
  builder=
  mv "$root.new" "$root"
  echo "$key" > "$build/systemd-root.key"
  echo "root: built in $(($(now_ms) - built_ms)) ms, $(du -sm "$root" | cut -f1) MB ($root)"
else
  echo "root: cached ($root)"
fi

# 3. Boot it. The container gets cgroups of its own (floodgate-test-PID in each hierarchy it
# writes), so that whatever it leaves there is found and removed; unregistered, nspawn would
# otherwise make its payload/ and supervisor/ at the hierarchies' root and leave them.
machine=floodgate-test-$$
nspawn_options=(--register=no --keep-unit)
if [ -d /run/systemd/system ]; then
  nspawn_options=()  # a systemd host gives it a scope of its own (not run here: no systemd)
else
  for mount in $(findmnt -n -o TARGET -t cgroup2) \
               $(findmnt -n -o TARGET -t cgroup -O name=systemd); do
    mkdir "$mount/$machine" || fail "cannot make the cgroup $mount/$machine"
    cgroups+=("$mount/$machine")
  done
fi
booted_ms=$(now_ms)
(
  for dir in "${cgroups[@]}"; do echo "$BASHPID" > "$dir/cgroup.procs"; done
  exec systemd-nspawn --quiet -D "$root" --machine="$machine" -b "${nspawn_options[@]}" \
    --private-network --volatile=overlay --bind-ro="$work/debs:/debs"
) < /dev/null > "$work/console.log" 2>&1 &
nspawn=$!

# Polls COMMAND until it succeeds, for at most SECONDS: every wait below is on an event.
until_ok() {
  local seconds=$1 what=$2
  shift 2
  local deadline=$(($(now_ms) + seconds * 1000))
  until "$@" > /dev/null 2>&1; do
    [ "$(now_ms)" -lt "$deadline" ] || fail "$what: not within $seconds s"
    kill -0 "$nspawn" 2> /dev/null || { cat "$work/console.log"; fail "the container exited"; }
    sleep 0.05
  done
}
container_init() {
  init=$(pgrep -P "$nspawn" -x systemd) || return 1
}
until_ok 30 "the container's systemd" container_init
# Runs a command inside the container, bounded in time, with a clean environment.
inside() {
  timeout -k 5 60 nsenter -t "$init" -a \
    env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 "$@" < /dev/null
}
# Booted: systemd answers on its bus and has reached its default target.
booted() {
  state=$(inside systemctl is-system-running)
  [ "$state" = running ] || [ "$state" = degraded ]
}
until_ok 60 "the boot" booted
[ "$state" = running ] ||
  echo "booted degraded: $(inside systemctl --failed --no-legend --plain | tr '\n' ' ')"
echo "boot: $(($(now_ms) - booted_ms)) ms"

# HTTP from the host's curl in the container's network namespace.
http() { nsenter -t "$init" -n curl -sS --max-time 5 "$@"; }
limit_answered() {  # the login rule's limit as /v1/authz answers it
  http -si -X POST -H 'X-Original-URI: /login' -H 'X-Original-Method: POST' \
    http://127.0.0.1:8080/v1/authz | tr -d '\r' | sed -n 's/^X-RateLimit-Limit: //p'
}
journal() { inside journalctl -u floodgate -o cat --no-pager; }
journal_has() { journal | grep -qF "$1"; }
main_pid() { inside systemctl show -p MainPID --value floodgate; }
config=/etc/floodgate/floodgate.yaml
edit_config() { inside sed -i "$1" "$config"; }

# 4. Install: the postinst enables and starts the unit.
inside dpkg -i "/debs/$(basename "$deb")" > "$work/install.log" 2>&1 ||
  { cat "$work/install.log"; fail "dpkg -i"; }
[ "$(inside systemctl is-enabled floodgate)" = enabled ] || fail "the unit is not enabled"
[ "$(inside systemctl is-active floodgate)" = active ] ||
  { journal; fail "the unit is not active"; }
until_ok 20 "/healthz" http -f http://127.0.0.1:8080/healthz
[ "$(http http://127.0.0.1:8080/healthz)" = ok ] || fail "/healthz"
[ "$(limit_answered)" = 5 ] || fail "the shipped rule's limit: '$(limit_answered)', wanted 5"

# 5. The hardening, as the kernel sees the running process.
pid=$(main_pid)
uid=$(inside id -u floodgate)
gid=$(inside id -g floodgate)
inside cat "/proc/$pid/status" > "$work/status"
grep -qP "^Uid:\t$uid\t$uid\t$uid\t$uid$" "$work/status" || fail "not running as floodgate ($uid)"
grep -qP "^Gid:\t$gid\t$gid\t$gid\t$gid$" "$work/status" || fail "not running as group $gid"
for field in CapInh CapPrm CapEff CapBnd CapAmb; do
  grep -qP "^$field:\t0+$" "$work/status" || fail "$field: $(grep "^$field" "$work/status")"
done
grep -qP '^NoNewPrivs:\t1$' "$work/status" || fail "NoNewPrivs is not set"
grep -qP '^Seccomp:\t2$' "$work/status" || fail "no seccomp filter"
# The last mount on / is the one the process sees; ProtectSystem=strict made it read-only.
root_options=$(inside cat "/proc/$pid/mountinfo" | awk '$5 == "/" {o = $6} END {print o}')
case ",$root_options," in *,ro,*) ;; *) fail "/ is not read-only: $root_options" ;; esac

# 6. Reload: a changed limit answers once floodgate logs the reload, in the same process.
edit_config 's|sliding_log:5/15m|sliding_log:7/15m|'
inside systemctl reload floodgate > "$work/reload.log" 2>&1 ||
  { cat "$work/reload.log"; journal | tail -5; fail "systemctl reload"; }
until_ok 10 "the reload in the log" journal_has "config reloaded (1 rules)"
[ "$(limit_answered)" = 7 ] || fail "after the reload the limit is '$(limit_answered)', wanted 7"
[ "$(main_pid)" = "$pid" ] || fail "the reload restarted the service"

# 7. A broken config: the reload fails visibly, the old config keeps answering.
edit_config 's|sliding_log:7/15m|sliding_log:0/15m|'
inside systemctl reload floodgate > "$work/reload-broken.log" 2>&1 &&
  fail "the reload of a broken config succeeded"
[ "$(inside systemctl is-active floodgate)" = active ] || fail "a failed reload stopped the unit"
[ "$(main_pid)" = "$pid" ] || fail "a failed reload restarted the service"
[ "$(limit_answered)" = 7 ] || fail "after a broken reload the limit is '$(limit_answered)'"
until_ok 10 "the reload's error in the log" journal_has "rules[0].policy"
edit_config 's|sliding_log:0/15m|sliding_log:7/15m|'

# 8. The logs.
for line in "floodgate $version listening on http://127.0.0.1:8080" "config reloaded (1 rules)"; do
  until_ok 10 "'$line' in journalctl" journal_has "$line"
done

# 9. Upgrade: the edited conffile stays, the service restarts into the new version with it.
upgrade_to() {
  inside dpkg -i "/debs/floodgate_${1}_$arch.deb" > "$work/upgrade.log" 2>&1 ||
    { cat "$work/upgrade.log"; fail "dpkg -i of $1"; }
  [ "$(inside dpkg-query -W -f "\${Version}" floodgate)" = "$1" ] || fail "not upgraded to $1"
  inside grep -q 'sliding_log:7/15m' "$config" || fail "the upgrade replaced the edited conffile"
  [ "$(inside find /etc/floodgate -name '*.dpkg-*')" = "" ] || fail "the upgrade left a .dpkg file"
}
upgrade_to "$version+upgrade1"
[ "$(inside systemctl is-enabled floodgate)" = enabled ] || fail "not enabled after the upgrade"
[ "$(inside systemctl is-active floodgate)" = active ] || fail "not active after the upgrade"
[ "$(main_pid)" != "$pid" ] || fail "the upgrade did not restart the service"
until_ok 20 "/healthz after the upgrade" http -f http://127.0.0.1:8080/healthz
[ "$(limit_answered)" = 7 ] || fail "after the upgrade the limit is '$(limit_answered)', wanted 7"
# The administrator's choice stays: disabled and stopped, an upgrade neither enables nor starts.
inside systemctl disable --now floodgate 2> /dev/null
upgrade_to "$version+upgrade2"
[ "$(inside systemctl is-enabled floodgate)" = disabled ] || fail "the upgrade enabled the unit"
[ "$(inside systemctl is-active floodgate)" = inactive ] || fail "the upgrade started the unit"
inside systemctl enable --now floodgate 2> /dev/null
until_ok 20 "/healthz when started again" http -f http://127.0.0.1:8080/healthz

# 10. Stop: SIGTERM, a clean exit, the port closed.
inside systemctl stop floodgate
[ "$(inside systemctl is-active floodgate)" = inactive ] || fail "not inactive after stop"
until_ok 10 "a clean stop in the log" journal_has "floodgate: stopped"
http http://127.0.0.1:8080/healthz > /dev/null 2>&1 && fail "/healthz answers after stop"

# 11. Purge, from a running service: stopped, and nothing of it left.
purged() {  # $1: what the purge ran after
  inside sh -c "grep -qs '^Uid:.$uid.' /proc/[0-9]*/status" &&  # no procps on a minimal system
    fail "a process of the floodgate user survived the purge $1"
  inside getent passwd floodgate > /dev/null && fail "the purge $1 left the floodgate user"
  inside getent group floodgate > /dev/null && fail "the purge $1 left the floodgate group"
  for path in /etc/floodgate /lib/systemd/system/floodgate.service \
              /etc/systemd/system/multi-user.target.wants/floodgate.service; do
    inside test -e "$path" && fail "the purge $1 left $path"
  done
  return 0
}
inside systemctl start floodgate
inside dpkg -P floodgate > "$work/purge.log" 2>&1 || { cat "$work/purge.log"; fail "dpkg -P"; }
purged "of a running service"

# 12. A purge need not find the Depends: the user goes without adduser too.
inside dpkg -i "/debs/$(basename "$deb")" > "$work/reinstall.log" 2>&1 ||
  { cat "$work/reinstall.log"; fail "dpkg -i after the purge"; }
inside dpkg -r floodgate > "$work/remove.log" 2>&1 || { cat "$work/remove.log"; fail "dpkg -r"; }
inside dpkg -r --force-depends adduser > "$work/remove-adduser.log" 2>&1 ||
  { cat "$work/remove-adduser.log"; fail "dpkg -r adduser"; }
inside dpkg -P floodgate > "$work/purge2.log" 2>&1 || { cat "$work/purge2.log"; fail "dpkg -P"; }
purged "without adduser"
echo "ok in $(($(now_ms) - start_ms)) ms"
