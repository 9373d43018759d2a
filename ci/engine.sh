#!/usr/bin/env bash
# A Docker engine and local base images for the container tests (no registry needed).
#   ci/engine.sh start   install docker.io + busybox-static if missing, start dockerd if none
#                        answers, build aoq-tiny:busybox (the quick tests' base, ~2 MB)
#   ci/engine.sh base    also build aoq-base:bookworm with debootstrap (~3 min here; the full tests
#                        and the real Dockerfiles build FROM it through BASE_IMAGE)
#   ci/engine.sh stop    stop the dockerd that `start` started (and nothing else)
# Storage: overlay2 where the kernel lets us mount overlayfs, else vfs (where every layer and
# every container is a full copy of the image: ~3 GB and a minute or two per build step of
# the real images); AOQ_STORAGE_DRIVER picks one. An engine already answering is used as is.
set -euo pipefail
PIDFILE=/tmp/aoq-dockerd.pid
need() { command -v "$1" >/dev/null 2>&1; }
apt_install() {
  [ "$(id -u)" = 0 ] || { echo "ci/engine.sh: installing $* needs root" >&2; exit 1; }
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

overlay_mounts() {  # an overlayfs mount on the filesystem that holds /var/lib/docker
  local d
  mkdir -p /var/lib/docker && d=$(mktemp -d /var/lib/docker/aoq-probe.XXXXXX) || return 1
  mkdir "$d"/{l,u,w,m}
  if mount -t overlay overlay -o "lowerdir=$d/l,upperdir=$d/u,workdir=$d/w" "$d/m" 2>/dev/null
  then umount "$d/m"; rm -rf "$d"; return 0
  fi
  rm -rf "$d"; return 1
}

start_engine() {
  need dockerd || apt_install docker.io
  if docker info >/dev/null 2>&1; then return; fi
  driver=${AOQ_STORAGE_DRIVER:-$(overlay_mounts && echo overlay2 || echo vfs)}
  setsid dockerd --iptables=false --storage-driver="$driver" >/tmp/aoq-dockerd.log 2>&1 &
  echo $! >"$PIDFILE"
  for _ in $(seq 60); do docker info >/dev/null 2>&1 && return; sleep 1; done
  echo "ci/engine.sh: dockerd did not come up; see /tmp/aoq-dockerd.log" >&2; exit 1
}

tiny_image() {
  docker image inspect aoq-tiny:busybox >/dev/null 2>&1 && return
  [ -x /bin/busybox ] || apt_install busybox-static
  root=$(mktemp -d)
  mkdir -p "$root"/{bin,etc,tmp,home/aoq/aoq/reports/runs}
  cp /bin/busybox "$root/bin/busybox"
  for tool in sh echo sleep cat ls mkdir test true false id; do ln -s busybox "$root/bin/$tool"; done
  printf 'root:x:0:0::/root:/bin/sh\naoq:x:1000:1000::/home/aoq:/bin/sh\n' >"$root/etc/passwd"
  printf 'root:x:0:\naoq:x:1000:\n' >"$root/etc/group"
  chown -R 1000:1000 "$root/home/aoq"
  chmod 755 "$root" "$root/bin" "$root/etc" "$root/home"  # mktemp -d made / 0700
  chmod 1777 "$root/tmp"
  tar -C "$root" -c . | docker import --change "ENV PATH=/bin" - aoq-tiny:busybox >/dev/null
  rm -rf "$root"
}

base_image() {
  docker image inspect aoq-base:bookworm >/dev/null 2>&1 && return
  need debootstrap || apt_install debootstrap
  root=$(mktemp -d)
  debootstrap --variant=minbase --include=python3,python3-pip,python3-venv,make \
    bookworm "$root" http://deb.debian.org/debian >/tmp/aoq-debootstrap.log
  chmod 755 "$root"  # mktemp -d made it 0700: no other user could reach anything in the image
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
  tar -C "$root" -c . | docker import - aoq-base:bookworm >/dev/null
  rm -rf "$root"
}

case "${1:-}" in
  start) start_engine; tiny_image ;;
  base) start_engine; tiny_image; base_image ;;
  stop) if [ -f "$PIDFILE" ]; then kill "$(cat "$PIDFILE")" 2>/dev/null || true; rm -f "$PIDFILE"; fi ;;
  *) echo "usage: ci/engine.sh start|base|stop" >&2; exit 2 ;;
esac
