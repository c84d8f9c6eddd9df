#!/usr/bin/env bash
# Stops the node broker-start.sh started from DIR, and only that node.
# Usage: broker-stop.sh DIR [--purge]    (--purge also deletes DIR)
set -uo pipefail
DIR=$(realpath -m "${1:?usage: broker-stop.sh DIR [--purge]}")
if [[ -f $DIR/broker.env ]]; then
  source "$DIR/broker.env"
  used=
  if kill -0 "$RMQ_PID" 2>/dev/null; then
    # The CPU the node used (user + system), said as it stops: the test command's lanes count
    # their own programs', and a node's share of two busy cores is otherwise invisible.
    if read -ra stat <"/proc/$RMQ_PID/stat" 2>/dev/null; then
      used=" (it used $(((stat[13] + stat[14]) / $(getconf CLK_TCK))) CPU seconds)"
    fi
    # 'stop PIDFILE' returns once the OS process is gone.
    timeout 60 "$RMQ_CTL" -q stop "$DIR/rabbit.pid" >/dev/null 2>&1 || kill -TERM "$RMQ_PID" 2>/dev/null
    for _ in $(seq 1 100); do kill -0 "$RMQ_PID" 2>/dev/null || break; sleep 0.2; done
    if kill -0 "$RMQ_PID" 2>/dev/null; then kill -KILL "$RMQ_PID"; sleep 1; fi
  fi
  rm -f "$DIR/broker.env"
  echo "broker-stop: $RMQ_NODE stopped$used" >&2
fi
if [[ ${2:-} == --purge ]]; then rm -rf "$DIR"; fi
exit 0
