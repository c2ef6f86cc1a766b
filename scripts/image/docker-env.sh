#!/usr/bin/env bash
# Makes sure this machine has a Docker engine, `docker compose` and debootstrap, from Debian's packages:
# installs docker.io, docker-compose and debootstrap when missing, starts dockerd when it is not
# running, and, when the docker command has no compose plugin, adds one that hands `docker compose ...`
# to Debian's docker-compose (bookworm ships Compose 1.29, which reads the same compose file; the one
# option of Compose 2 the docs use, `up --wait`, is done by the plugin).
set -euo pipefail

log() { printf '  [docker-env] %s\n' "$*" >&2; }

missing=()
command -v dockerd >/dev/null || missing+=(docker.io)
command -v docker-compose >/dev/null || docker compose version >/dev/null 2>&1 || missing+=(docker-compose)
command -v debootstrap >/dev/null || missing+=(debootstrap)
if [ ${#missing[@]} -gt 0 ]; then
  log "apt-get install ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -o DPkg::Lock::Timeout=300 "${missing[@]}" >/dev/null
fi

if ! docker info >/dev/null 2>&1; then
  log "starting dockerd (log: /var/log/keyholder-dockerd.log)"
  nohup dockerd >/var/log/keyholder-dockerd.log 2>&1 &
  for _ in $(seq 1 120); do docker info >/dev/null 2>&1 && break; sleep 0.5; done
  docker info >/dev/null 2>&1 || { tail -n 20 /var/log/keyholder-dockerd.log >&2; exit 1; }
fi

plugin=/usr/local/lib/docker/cli-plugins/docker-compose
if ! docker compose version >/dev/null 2>&1 || grep -qs 'Debian docker-compose' "$plugin"; then
  plugin=/usr/local/lib/docker/cli-plugins/docker-compose
  log "adding $plugin (hands docker compose to $(command -v docker-compose))"
  mkdir -p "$(dirname "$plugin")"
  # The CLI plugin protocol: answer the metadata query, otherwise drop the plugin's own name and run.
  cat >"$plugin" <<'PLUGIN'
#!/bin/bash
# The CLI plugin protocol: answer the metadata query, otherwise drop the plugin's own name and run.
if [ "${1:-}" = docker-cli-plugin-metadata ]; then
  printf '{"SchemaVersion":"0.1.0","Vendor":"Debian docker-compose","Version":"1","ShortDescription":"Docker Compose"}\n'
  exit 0
fi
shift
args=() before=() wait=no seen_up=no
for a in "$@"; do
  if [ "$a" = --wait ]; then wait=yes; continue; fi
  args+=("$a")
  [ "$a" = up ] && seen_up=yes
  [ "$seen_up" = no ] && before+=("$a")
done
[ "$wait" = yes ] || exec docker-compose "${args[@]}"
docker-compose "${args[@]}" || exit
# Compose 1 has no `up --wait`: wait here, as Compose 2 does, until each container is healthy, or
# running when it has no healthcheck (or has exited, a one-off job).
for _ in $(seq 1 600); do
  pending=0
  for id in $(docker-compose "${before[@]}" ps -q); do
    case "$(docker inspect -f '{{.State.Status}} {{if .State.Health}}{{.State.Health.Status}}{{end}}' "$id")" in
      'running healthy' | 'running ' | exited*) ;;
      *) pending=1 ;;
    esac
  done
  [ "$pending" = 0 ] && exit 0
  sleep 1
done
echo 'docker compose up --wait: not every service healthy within 600 s' >&2
exit 1
PLUGIN
  chmod +x "$plugin"
  docker compose version >/dev/null
fi
