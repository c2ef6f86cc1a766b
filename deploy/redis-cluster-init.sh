#!/bin/sh
# Forms the Redis Cluster of docker-compose.yml's profile cluster on its first start (3 masters, a
# replica each), re-forms it on later starts, and exits 0 only once it serves: keyholder-cluster waits
# for that (service_completed_successfully).
set -eu

nodes="redis-node-1 redis-node-2 redis-node-3 redis-node-4 redis-node-5 redis-node-6"
count=6

ip_of() { getent hosts "$1" | cut -d' ' -f1; }
# info_field NODE FIELD COMMAND...: one "field:value" line of an INFO-style answer.
info_field() {
  _node=$1 _field=$2
  shift 2
  redis-cli -h "$_node" "$@" | tr -d '\r' | sed -n "s/^$_field:\(.*\)/\1/p"
}

known=$(info_field redis-node-1 cluster_known_nodes cluster info 2>/dev/null || echo 0)
if [ "${known:-0}" -le 1 ]; then
  # redis-cli --cluster create takes addresses, not names.
  # shellcheck disable=SC2046
  redis-cli --cluster create $(for n in $nodes; do echo "$(ip_of "$n"):6379"; done) --cluster-replicas 1 --cluster-yes
else
  # The nodes kept the cluster in their volumes (nodes.conf), but not their addresses: after
  # `docker compose down` + `up` the containers may have new IPs, while nodes.conf still points at
  # the old ones (some now another node's). A MEET at a node's current address, answered with a node
  # ID already known, updates that node's address; the slots and roles stay as they were.
  for a in $nodes; do
    for b in $nodes; do
      [ "$a" = "$b" ] || redis-cli -h "$a" cluster meet "$(ip_of "$b")" 6379 >/dev/null
    done
  done
fi

# Serving means, on every node: all slots served, every node known and none failing, and a master has
# its replica (min-replicas-to-write 1 refuses writes without one).
serving() {
  for n in $nodes; do
    [ "$(info_field "$n" cluster_state cluster info)" = ok ] || return 1
    [ "$(info_field "$n" cluster_slots_ok cluster info)" = 16384 ] || return 1
    [ "$(info_field "$n" cluster_known_nodes cluster info)" = "$count" ] || return 1
    redis-cli -h "$n" cluster nodes | grep -Eq 'fail|handshake|noaddr|disconnected' && return 1
    if [ "$(info_field "$n" role info replication)" = master ]; then
      [ "$(info_field "$n" connected_slaves info replication)" -ge 1 ] || return 1
    fi
  done
  return 0
}

# A replica replicates from its master's address as nodes.conf had it. Redis takes a moved node's new
# address into its cluster view, but a replica that learns it from gossip keeps replicating from the
# old one (Redis 7.0): CLUSTER REPLICATE with the same master points it at the current address.
repoint_replicas() {
  for n in $nodes; do
    [ "$(info_field "$n" role info replication)" = slave ] || continue
    [ "$(info_field "$n" master_link_status info replication)" = up ] && continue
    master_id=$(redis-cli -h "$n" cluster nodes | awk '$3 ~ /myself/ { print $4 }')
    master_ip=$(redis-cli -h "$n" cluster nodes | awk -v id="$master_id" '$1 == id { split($2, a, ":"); print a[1] }')
    if [ -n "$master_ip" ] && [ "$(info_field "$n" master_host info replication)" != "$master_ip" ]; then
      redis-cli -h "$n" cluster replicate "$master_id" >/dev/null || true
    fi
  done
}

tries=0
until serving; do
  repoint_replicas
  tries=$((tries + 1))
  if [ "$tries" -ge 120 ]; then
    echo "the cluster does not serve after 120 s:" >&2
    redis-cli -h redis-node-1 cluster nodes >&2
    exit 1
  fi
  sleep 1
done
echo "cluster serving: $(redis-cli -h redis-node-1 cluster nodes | grep -c master) masters, $(redis-cli -h redis-node-1 cluster nodes | grep -c slave) replicas"
