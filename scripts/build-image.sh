#!/usr/bin/env bash
# Builds floodgate's container image from ./Containerfile with podman, pulling nothing.
#
# Assembles WORK_DIR/rootfs: the stripped binary (also as /bin/ratelimit), every shared library `ldd` lists (at the
# path the dynamic loader looks in), CA certificates, the default config, /etc/passwd and
# /etc/group with the floodgate user (65532), the time zone database and a /tmp; then `podman build`s it FROM scratch.
# Usage: build-image.sh FLOODGATE_BINARY WORK_DIR TAG
# PODMAN_ARGS: podman's global options (e.g. --root DIR --storage-driver vfs for a scratch store).
set -euo pipefail
binary=$1
work=$2
tag=$3
source_dir=$(cd "$(dirname "$0")/.." && pwd)
read -r -a podman_args <<< "${PODMAN_ARGS:-}"

rm -rf "$work" && mkdir -p "$work/rootfs"
rootfs=$work/rootfs
install -d "$rootfs/usr/bin" "$rootfs/etc/floodgate" "$rootfs/etc/ssl/certs"
install -d -m 1777 "$rootfs/tmp"
strip --strip-unneeded -o "$rootfs/usr/bin/floodgate" "$binary"
# envoyproxy/ratelimit's path: the same binary under upstream's name starts upstream's mode
# (`command: /bin/ratelimit`, `--entrypoint /bin/ratelimit`; docs/envoy.md). A hard link: one
# file in the image.
install -d "$rootfs/bin"
ln "$rootfs/usr/bin/floodgate" "$rootfs/bin/ratelimit"
# "libfoo.so.1 => /lib/x86_64-linux-gnu/libfoo.so.1 (0x...)" and the loader's own line.
ldd "$binary" | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}' |
  while read -r lib; do
    install -D -m 644 "$(readlink -f "$lib")" "$rootfs$lib"
  done
chmod 755 "$rootfs"/lib*/ld-linux* 2>/dev/null || true
install -m 644 /etc/ssl/certs/ca-certificates.crt "$rootfs/etc/ssl/certs/"
# The time zones of calendar windows (tz=ZONE), where abseil looks for them; not the
# leap-second variants (right/), which no civil time here uses.
mkdir -p "$rootfs/usr/share"
cp -a /usr/share/zoneinfo "$rootfs/usr/share/"
rm -rf "$rootfs/usr/share/zoneinfo/right"
install -m 644 "$source_dir/packaging/floodgate.yaml" "$rootfs/etc/floodgate/"
printf 'root:x:0:0:root:/root:/sbin/nologin\nfloodgate:x:65532:65532:floodgate:/nonexistent:/sbin/nologin\n' \
  > "$rootfs/etc/passwd"
printf 'root:x:0:\nfloodgate:x:65532:\n' > "$rootfs/etc/group"

podman "${podman_args[@]}" build --quiet --format docker -f "$source_dir/Containerfile" \
  -t "$tag" "$work" > "$work/image-id"
size=$(podman "${podman_args[@]}" image inspect --format '{{.Size}}' "$tag")
echo "image $tag: $((size / 1024 / 1024)) MiB ($size bytes), rootfs $(du -sh "$rootfs" | cut -f1)"
