#!/usr/bin/env bash
# Build the DockerSandbox default image offline (no registry needed): a Debian bookworm minbase root filesystem
# made by debootstrap from the Debian mirror apt already uses, imported with `docker import`.
# Falls back to a busybox image (busybox-static) when debootstrap is unavailable; it exits 3 then, because
# DockerSandbox needs GNU coreutils/findutils (realpath -m, find -printf) and refuses that image.
# Usage: tools/build_sandbox_image.sh [tag]   (default knowlyr-sandbox:base; DOCKER_HOST is honoured)
set -euo pipefail
TAG="${1:-knowlyr-sandbox:base}"
CACHE="${KNOWLYR_IMAGE_CACHE:-/var/tmp/knowlyr-docker/rootfs-cache}"
mkdir -p "$CACHE"
mirror() {  # first Debian mirror named in apt's sources (deb822 or one-line format)
  local m
  m=$(grep -hE '^(URIs:|deb )' /etc/apt/sources.list /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list 2>/dev/null \
      | grep -v security | grep -oE 'https?://[^ ]+' | head -1 || true)
  echo "${m:-http://deb.debian.org/debian}"
}
import_dir() {  # tar a root filesystem into a docker image
  tar -C "$1" -c . | docker import \
    --change 'ENV PATH=/usr/local/bin:/usr/bin:/bin' --change 'ENV LANG=C.UTF-8' --change 'WORKDIR /workspace' \
    - "$TAG" >/dev/null
}
if command -v debootstrap >/dev/null 2>&1 && [[ $(id -u) -eq 0 ]]; then
  ROOT="$CACHE/bookworm-minbase"
  if [[ ! -x "$ROOT/usr/bin/python3" || ! -x "$ROOT/usr/bin/git" ]]; then
    rm -rf "$ROOT"; M=$(mirror)
    echo "debootstrap bookworm minbase from $M (about a minute)..." >&2
    debootstrap --variant=minbase --include=python3,git,bash,coreutils,grep,findutils,tar bookworm "$ROOT" "$M" >"$CACHE/debootstrap.log" 2>&1 \
      || { echo "debootstrap failed; see $CACHE/debootstrap.log" >&2; exit 1; }
    rm -rf "$ROOT/var/cache/apt/archives/"*.deb "$ROOT/var/lib/apt/lists/"*
  fi
  mkdir -p "$ROOT/workspace"
  import_dir "$ROOT"
  echo "built $TAG (debian bookworm minbase, python3 + git)"
else
  BB=$(command -v busybox || true)
  if [[ -z "$BB" ]] || ! file -L "$BB" 2>/dev/null | grep -q static; then
    [[ -x /bin/busybox ]] && BB=/bin/busybox
  fi
  [[ -n "$BB" ]] || { echo "neither debootstrap nor busybox(-static) available: apt-get install -y debootstrap" >&2; exit 1; }
  ROOT=$(mktemp -d); trap 'rm -rf "$ROOT"' EXIT
  mkdir -p "$ROOT/bin" "$ROOT/usr/bin" "$ROOT/tmp" "$ROOT/workspace" "$ROOT/etc"
  cp "$BB" "$ROOT/bin/busybox"
  for a in $("$ROOT/bin/busybox" --list); do [[ "$a" == busybox ]] || ln -sf busybox "$ROOT/bin/$a"; done
  ln -sf /bin/sh "$ROOT/bin/bash"
  echo 'root:x:0:0:root:/root:/bin/sh' > "$ROOT/etc/passwd"; echo 'nobody:x:65534:65534:nobody:/tmp:/bin/sh' >> "$ROOT/etc/passwd"
  import_dir "$ROOT"
  echo "built $TAG from busybox (fallback): it runs shell commands, but DockerSandbox needs GNU coreutils/findutils," >&2
  echo "git and python3 and refuses it -- install debootstrap and rebuild for a usable sandbox image" >&2
  exit 3
fi
