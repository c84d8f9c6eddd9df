#!/usr/bin/env bash
# Starts a three-node RabbitMQ cluster on loopback: three broker-start.sh nodes in DIR/n1..n3
# with one Erlang cookie, n2 and n3 joined to n1.
# Usage: cluster-start.sh DIR [PORT]   (PORT: the first node's, the others after it; absent or
#        0: each picks a free one)
# Prints RMQ_CLUSTER_PORTS="p1 p2 p3" and RMQ_CLUSTER_DIRS="DIR/n1 DIR/n2 DIR/n3";
# scripts/cluster-stop.sh DIR stops them all.
set -euo pipefail
DIR=$(realpath -m "${1:?usage: cluster-start.sh DIR [PORT]}")
PORT=${2:-0}
here=$(dirname "$0")
mkdir -p "$DIR"
cookie=$(openssl rand -hex 20)
ports=()
for i in 1 2 3; do
  mkdir -p "$DIR/n$i"
  rm -f "$DIR/n$i/.erlang.cookie"
  (umask 077; echo "$cookie" > "$DIR/n$i/.erlang.cookie")
  node_port=0
  ((PORT == 0)) || node_port=$((PORT + i - 1))
  "$here/broker-start.sh" "$DIR/n$i" "$node_port" > "$DIR/n$i.env"
  ports+=("$(sed -n 's/^RMQ_PORT=//p' "$DIR/n$i.env")")
done
first=$(sed -n 's/^RMQ_NODE=//p' "$DIR/n1.env")
for i in 2 3; do
  ctl=$DIR/n$i/rabbitmqctl
  "$ctl" -q stop_app >/dev/null
  "$ctl" -q join_cluster "$first" >/dev/null
  "$ctl" -q start_app >/dev/null
done
"$DIR/n1/rabbitmqctl" -q await_online_nodes 3 -t 60 >/dev/null 2>&1 || {
  echo "cluster-start: the three nodes did not come together" >&2
  exit 1
}
echo "cluster-start: ${ports[*]} clustered" >&2
echo "RMQ_CLUSTER_PORTS=\"${ports[*]}\""
echo "RMQ_CLUSTER_DIRS=\"$DIR/n1 $DIR/n2 $DIR/n3\""
