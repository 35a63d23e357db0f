#!/usr/bin/env bash
# Builds and checks tidegate's packages (docs/src/install.md):
#
#   scripts/package.sh deb          the Debian package (cargo-deb), from the already built binary
#   scripts/package.sh check-deb    installs it with dpkg -i on this machine, verifies the systemd
#                                   units, starts the coordinator and the edge the way the units do
#                                   (their ExecStart, Environment and User), reaches /readyz, then
#                                   removes and purges it and checks that nothing is left
#   scripts/package.sh image        the container image from Containerfile, without a daemon
#                                   (buildah, FROM scratch), exported as an OCI layout
#   scripts/package.sh check-image  checks the image's config (non-root user, entry points, ports)
#                                   and contents, runs its root filesystem (chroot, as the image's
#                                   user) to /readyz, and runs it with podman when this machine
#                                   allows containers (otherwise it says why)
#   scripts/package.sh ci           all four (scripts/test.sh)
#
# PACKAGE_PROFILE (default dev) is the cargo profile whose binary is packaged: CI packages the
# binary its tests ran; a release runs `cargo build --release` and PACKAGE_PROFILE=release.
# cargo-deb (pinned) is installed once into ~/.cache/tidegate-tools. check-deb and check-image
# need root (dpkg, chroot, setpriv). Everything goes to stderr except the artifacts' paths.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

profile="${PACKAGE_PROFILE:-dev}"
profile_dir="$profile"
[ "$profile" = dev ] && profile_dir=debug
target_dir="${CARGO_TARGET_DIR:-$root/target}"
binary="$target_dir/$profile_dir/tidegate"
out="$target_dir/package"
tools="$HOME/.cache/tidegate-tools"
cargo_deb_version=3.6.3
image_name="localhost/tidegate:$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n1)"

die() { echo "scripts/package.sh: $*" >&2; exit 1; }
say() { echo "scripts/package.sh: $*" >&2; }
need_root() { [ "$(id -u)" -eq 0 ] || die "$1 needs root (dpkg, chroot and setpriv)"; }

[ -x "$binary" ] || die "no binary at $binary: build it first (cargo build${profile:+ --profile $profile})"

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# wait_ready URL PID SECONDS: polls URL until it answers 200; fails if PID exits first.
wait_ready() {
  local url="$1" pid="$2" deadline=$((SECONDS + $3))
  while ((SECONDS < deadline)); do
    if curl -fsS -o /dev/null --max-time 2 "$url" 2>/dev/null; then return 0; fi
    kill -0 "$pid" 2>/dev/null || return 1
    sleep 0.2
  done
  return 1
}

# unit_value UNIT KEY: the value of the first KEY= line of a unit file.
unit_value() { sed -n "s/^$2=//p" "$1" | head -n1; }

# --- the Debian package -----------------------------------------------------------------------

ensure_cargo_deb() {
  if [ ! -x "$tools/bin/cargo-deb" ] || ! "$tools/bin/cargo-deb" --version 2>/dev/null | grep -q "$cargo_deb_version"; then
    say "installing cargo-deb $cargo_deb_version into $tools (one-off)"
    cargo install cargo-deb --version "$cargo_deb_version" --locked --no-default-features \
      --root "$tools" -j 2 >&2 || die "cargo install cargo-deb failed"
  fi
}

build_deb() {
  ensure_cargo_deb
  mkdir -p "$out"
  rm -f "$out"/tidegate_*.deb
  PATH="$tools/bin:$PATH" cargo deb --no-build --fast --profile "$profile" --output "$out/" >&2 ||
    die "cargo deb failed"
  local deb
  deb="$(ls "$out"/tidegate_*.deb)"
  say "built $deb ($(du -h "$deb" | cut -f1))"
  echo "$deb"
}

check_deb() {
  need_root "check-deb"
  local deb
  deb="$(ls "$out"/tidegate_*.deb 2>/dev/null | head -n1)"
  [ -n "$deb" ] || die "no package in $out: run scripts/package.sh deb first"
  # The package's own view: what it ships, and that the config is a conffile.
  local contents
  contents="$(dpkg-deb --contents "$deb")"
  for path in ./usr/bin/tidegate ./etc/tidegate/tidegate.toml ./lib/systemd/system/tidegate.service \
    ./lib/systemd/system/tidegate-edge.service ./usr/share/doc/tidegate/README.md; do
    grep -q " $path\$" <<<"$contents" || die "$deb does not ship $path"
  done
  dpkg-deb --ctrl-tarfile "$deb" | tar -xO ./conffiles | grep -qx /etc/tidegate/tidegate.toml ||
    die "/etc/tidegate/tidegate.toml is not a conffile"

  # A package left by an earlier, failed run would hide what this install does.
  if dpkg -s tidegate >/dev/null 2>&1; then dpkg -P tidegate >&2; fi
  dpkg -i "$deb" >&2 || die "dpkg -i $deb failed"
  dpkg -s tidegate | grep -q '^Status: install ok installed' || die "dpkg -s: not installed"
  /usr/bin/tidegate --version >&2 || die "the installed binary does not run"
  local uid
  uid="$(id -u tidegate)" || die "postinst created no user tidegate"
  ((uid < 1000)) || die "user tidegate is not a system user (uid $uid)"
  [ "$(stat -c %U:%a /var/lib/tidegate)" = tidegate:750 ] ||
    die "/var/lib/tidegate is $(stat -c %U:%a /var/lib/tidegate), not tidegate:750"
  [ "$(stat -c %U:%G:%a /etc/tidegate/tidegate.toml)" = root:tidegate:640 ] ||
    die "/etc/tidegate/tidegate.toml is $(stat -c %U:%G:%a /etc/tidegate/tidegate.toml), not root:tidegate:640"

  local units=(/lib/systemd/system/tidegate.service /lib/systemd/system/tidegate-edge.service)
  local verify
  verify="$(systemd-analyze verify "${units[@]}" 2>&1)" || die "systemd-analyze verify failed: $verify"
  # verify exits 0 on some warnings; our units must give none about themselves.
  if grep -i 'tidegate' <<<"$verify"; then die "systemd-analyze verify warns about the units"; fi
  say "systemd-analyze verify: both units clean"

  # The coordinator, started the way its unit starts it: ExecStart as User=, with a clean
  # environment (systemd passes none of ours). Only the port is moved off 8080, through the
  # environment, as a drop-in would.
  local unit=/lib/systemd/system/tidegate.service user exec port pid
  user="$(unit_value "$unit" User)"
  exec="$(unit_value "$unit" ExecStart)"
  port="$(free_port)"
  # shellcheck disable=SC2086 # ExecStart is split into words, as systemd does.
  env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin TIDEGATE_SERVER__PORT="$port" \
    setpriv --reuid="$user" --regid="$user" --init-groups -- $exec >"$out/serve.log" 2>&1 &
  pid=$!
  if ! wait_ready "http://127.0.0.1:$port/readyz" "$pid" 30; then
    cat "$out/serve.log" >&2
    die "the packaged coordinator did not become ready on port $port"
  fi
  local blue
  blue="$(curl -fsS "http://127.0.0.1:$port/v1/tag?user_id=user-42")" || die "tagging failed"
  say "packaged coordinator ready as $user on :$port; tag of user-42: $blue"

  # The edge, the same way: its unit's Environment= (the cache under /var/lib/tidegate-edge) and
  # the coordinator list a drop-in would give it.
  local eunit=/lib/systemd/system/tidegate-edge.service eexec eenv eport epid
  eexec="$(unit_value "$eunit" ExecStart)"
  eenv="$(unit_value "$eunit" Environment)"
  eport="$(free_port)"
  install -d -o "$user" -g "$user" -m 0750 /var/lib/tidegate-edge
  # shellcheck disable=SC2086
  env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin "$eenv" TIDEGATE_EDGE__PORT="$eport" \
    TIDEGATE_EDGE__COORDINATORS="[\"http://127.0.0.1:$port\"]" \
    setpriv --reuid="$user" --regid="$user" --init-groups -- $eexec >"$out/edge.log" 2>&1 &
  epid=$!
  if ! wait_ready "http://127.0.0.1:$eport/readyz" "$epid" 30; then
    cat "$out/edge.log" >&2
    kill "$pid" 2>/dev/null || true
    die "the packaged edge did not become ready on port $eport"
  fi
  local etag
  etag="$(curl -fsS "http://127.0.0.1:$eport/v1/tag?user_id=user-42")" || die "edge tagging failed"
  [ "$(jq -r .color <<<"$etag")" = "$(jq -r .color <<<"$blue")" ] ||
    die "the edge tags user-42 $(jq -r .color <<<"$etag"), the coordinator $(jq -r .color <<<"$blue")"
  [ -s /var/lib/tidegate-edge/edge-table.json ] || die "the edge wrote no cache in /var/lib/tidegate-edge"
  say "packaged edge ready on :$eport, agrees on user-42, cache in /var/lib/tidegate-edge"
  kill -TERM "$epid"
  wait "$epid" || die "the edge did not stop cleanly on SIGTERM"
  kill -TERM "$pid"
  wait "$pid" || die "the coordinator did not stop cleanly on SIGTERM"
  [ "$(stat -c %U /var/lib/tidegate/tidegate.log)" = "$user" ] ||
    die "the command log is not owned by $user"
  [ -s /var/lib/tidegate/tidegate.snapshot ] || die "no shutdown snapshot in /var/lib/tidegate"

  # remove keeps the config, the log and the user; purge deletes them.
  dpkg -r tidegate >&2 || die "dpkg -r failed"
  [ ! -e /usr/bin/tidegate ] || die "dpkg -r left /usr/bin/tidegate"
  [ ! -e /lib/systemd/system/tidegate.service ] || die "dpkg -r left the unit"
  [ -e /etc/tidegate/tidegate.toml ] || die "dpkg -r removed the conffile"
  [ -s /var/lib/tidegate/tidegate.log ] || die "dpkg -r removed the command log"
  dpkg -P tidegate >&2 || die "dpkg -P failed"
  [ ! -e /etc/tidegate ] || die "dpkg -P left /etc/tidegate"
  [ ! -e /var/lib/tidegate ] || die "dpkg -P left /var/lib/tidegate"
  [ ! -e /var/lib/tidegate-edge ] || die "dpkg -P left /var/lib/tidegate-edge"
  ! getent passwd tidegate >/dev/null || die "dpkg -P left the user tidegate"
  ! dpkg -s tidegate >/dev/null 2>&1 || die "dpkg still lists tidegate after purge"
  say "check-deb: installed, verified, started as the units do, removed and purged cleanly"
}

# --- the container image ----------------------------------------------------------------------

ensure_buildah() {
  if ! command -v buildah >/dev/null || ! command -v umoci >/dev/null; then
    need_root "installing buildah and umoci"
    say "installing Debian's buildah, umoci and podman (one-off)"
    { apt-get update -qq &&
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -o DPkg::Lock::Timeout=300 buildah umoci podman; } >&2 ||
      die "installing buildah, umoci and podman with apt-get failed"
  fi
}

# The image's root filesystem: the stripped binary, exactly the shared libraries it links (ldd),
# the CA roots, a passwd naming the non-root user and the default config; state/ becomes the
# user's state directory.
stage_rootfs() {
  local stage="$out/image-context" rootfs
  rootfs="$stage/rootfs"
  rm -rf "$stage"
  mkdir -p "$rootfs"/{usr/bin,etc/tidegate,etc/ssl/certs,var/lib,tmp} "$stage/state"
  cp Containerfile "$stage/"
  objcopy --strip-debug "$binary" "$rootfs/usr/bin/tidegate"
  local lib
  while read -r lib; do
    mkdir -p "$rootfs$(dirname "$lib")"
    cp -L "$lib" "$rootfs$lib"
  done < <(ldd "$binary" | grep -o '/[^ ]*' | sort -u)
  cp /etc/ssl/certs/ca-certificates.crt "$rootfs/etc/ssl/certs/"
  cp config/tidegate.toml "$rootfs/etc/tidegate/"
  printf 'root:x:0:0:root:/root:/sbin/nologin\ntidegate:x:65532:65532:tidegate:/var/lib/tidegate:/sbin/nologin\n' >"$rootfs/etc/passwd"
  printf 'root:x:0:\ntidegate:x:65532:\n' >"$rootfs/etc/group"
  chmod 1777 "$rootfs/tmp"
  echo "$stage"
}

build_image() {
  need_root "image"
  ensure_buildah
  local stage
  stage="$(stage_rootfs)"
  # vfs storage and chroot isolation: no daemon, no overlay mounts, nothing run inside (FROM
  # scratch has no RUN), so this works inside an unprivileged CI container too.
  export STORAGE_DRIVER=vfs
  buildah --storage-driver vfs bud --isolation chroot --layers=false -f "$stage/Containerfile" \
    -t "$image_name" "$stage" >&2 || die "buildah bud failed"
  rm -rf "$out/image-oci"
  buildah --storage-driver vfs push "$image_name" "oci:$out/image-oci:tidegate" >&2 ||
    die "buildah push to an OCI layout failed"
  say "built $image_name, exported to $out/image-oci"
  echo "$out/image-oci"
}

check_image() {
  need_root "check-image"
  local layout="$out/image-oci"
  [ -d "$layout" ] || die "no image at $layout: run scripts/package.sh image first"
  local config
  config="$(buildah --storage-driver vfs inspect --type image "$image_name")" || die "buildah inspect failed"
  local user entry cmd ports
  user="$(jq -r '.OCIv1.config.User' <<<"$config")"
  entry="$(jq -c '.OCIv1.config.Entrypoint' <<<"$config")"
  cmd="$(jq -c '.OCIv1.config.Cmd' <<<"$config")"
  ports="$(jq -c '.OCIv1.config.ExposedPorts | keys' <<<"$config")"
  [ "$user" = "65532:65532" ] || die "the image runs as '$user', not 65532:65532"
  [ "$entry" = '["/usr/bin/tidegate"]' ] || die "entrypoint is $entry"
  [ "$cmd" = '["serve","--config","/etc/tidegate/tidegate.toml"]' ] || die "cmd is $cmd"
  [ "$ports" = '["8080/tcp","8081/tcp"]' ] || die "exposed ports are $ports"
  say "image config: user $user, entrypoint $entry, cmd $cmd, ports $ports"

  # Its contents, unpacked from the OCI layout as a runtime would.
  local bundle="$out/image-bundle"
  rm -rf "$bundle"
  umoci unpack --image "$layout:tidegate" "$bundle" >&2 || die "umoci unpack failed"
  local rootfs="$bundle/rootfs"
  [ -x "$rootfs/usr/bin/tidegate" ] || die "the image has no /usr/bin/tidegate"
  [ "$(stat -c %u "$rootfs/var/lib/tidegate")" = 65532 ] || die "/var/lib/tidegate is not the user's"
  [ ! -e "$rootfs/bin/sh" ] || die "the image carries a shell"
  local files
  files="$(find "$rootfs" -type f | wc -l)"
  say "image contents: $files files, $(du -sh "$rootfs" | cut -f1), no shell"

  # Run what the image runs, in its own root filesystem, as its user: the coordinator (the
  # default command) and the edge (the other entry point) both reach /readyz. This is a real
  # run of the image's files and libraries, without namespaces.
  # Two device nodes of its own (no mounts: nothing of the host is ever under the bundle, so
  # removing it is always safe).
  mkdir -p "$rootfs/dev"
  mknod -m 666 "$rootfs/dev/null" c 1 3
  mknod -m 666 "$rootfs/dev/urandom" c 1 9
  local port eport pid epid image_env image_run
  port="$(free_port)"
  eport="$(free_port)"
  # The image's own Env, Entrypoint and Cmd, as a runtime would use them.
  mapfile -t image_env < <(jq -r '.OCIv1.config.Env[]' <<<"$config")
  mapfile -t image_run < <(jq -r '(.OCIv1.config.Entrypoint + .OCIv1.config.Cmd)[]' <<<"$config")
  env -i "${image_env[@]}" TIDEGATE_SERVER__PORT="$port" \
    chroot --userspec="$user" "$rootfs" "${image_run[@]}" >"$out/image-serve.log" 2>&1 &
  pid=$!
  if ! wait_ready "http://127.0.0.1:$port/readyz" "$pid" 30; then
    cat "$out/image-serve.log" >&2
    die "the image's coordinator did not become ready"
  fi
  env -i "${image_env[@]}" TIDEGATE_EDGE__PORT="$eport" \
    TIDEGATE_EDGE__COORDINATORS="[\"http://127.0.0.1:$port\"]" \
    chroot --userspec="$user" "$rootfs" "${image_run[0]}" edge --config /etc/tidegate/tidegate.toml \
    >"$out/image-edge.log" 2>&1 &
  epid=$!
  if ! wait_ready "http://127.0.0.1:$eport/readyz" "$epid" 30; then
    cat "$out/image-edge.log" >&2
    kill "$pid" 2>/dev/null || true
    die "the image's edge did not become ready"
  fi
  kill -TERM "$epid" "$pid"
  wait "$epid" || die "the image's edge did not stop cleanly"
  wait "$pid" || die "the image's coordinator did not stop cleanly"
  [ "$(stat -c %u "$rootfs/var/lib/tidegate/tidegate.log")" = 65532 ] || die "the log is not the user's"
  say "image root filesystem: coordinator and edge reached /readyz as uid 65532 (chroot)"

  # A real container when this machine allows one.
  local why
  if why="$(podman --storage-driver vfs run --rm --network host --entrypoint /usr/bin/tidegate \
    "$image_name" --version 2>&1)"; then
    say "podman run: $why"
  else
    say "podman run is not possible on this machine, so the image was checked by its config, contents and a chroot run instead: $(tail -n1 <<<"$why")"
  fi
}

case "${1:-}" in
  deb) build_deb ;;
  check-deb) check_deb ;;
  image) build_image ;;
  check-image) check_image ;;
  ci)
    started=$SECONDS
    build_deb >/dev/null
    check_deb
    say "deb: $((SECONDS - started)) s"
    started=$SECONDS
    build_image >/dev/null
    check_image
    say "image: $((SECONDS - started)) s"
    ;;
  *) die "usage: scripts/package.sh deb | check-deb | image | check-image | ci" ;;
esac
