#!/usr/bin/env bash
# How a consumer's cost grows with the work (part of bench/compare.sh): 1, 10 and 100
# consuming connections of one channel each, and one connection with 100 channels, all fed by
# one producer process at the same total rate, on both drivers. One JSON line per run:
#   {"driver", "connections", "channels", "result": <the consumer process's warren perf line>}
#   bench/scale.sh --warren BIN --url URL [--seconds S] [--rate MSGS_PER_S]
# The consumer process runs alone (no producer in it), so its CPU and peak RSS are the
# consumers' own; it starts first and runs a second longer than the producer.
set -euo pipefail
warren= url= seconds=5 rate=10000
while (($#)); do
  case $1 in
    --warren) warren=$2; shift 2 ;;
    --url) url=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    *) echo "usage: bench/scale.sh --warren BIN --url URL [--seconds S] [--rate N]" >&2; exit 2 ;;
  esac
done
[[ -n $warren && -n $url ]] || { echo "bench/scale.sh: --warren and --url are required" >&2; exit 2; }
queue=bench-scale
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for driver in uv asio; do
  for shape in "1 1" "10 1" "100 1" "1 100"; do
    read -r connections channels <<<"$shape"
    "$warren" delete queue "$queue" --url "$url" >/dev/null
    "$warren" declare queue "$queue" --url "$url" >/dev/null
    "$warren" perf --driver "$driver" -x 0 -y "$connections" -Y "$channels" -q 100 -A 10 -u "$queue" \
      -z "$((seconds + 1))" --json --url "$url" >"$out" 2>/dev/null &
    consumers=$!
    sleep 1  # the consumers are subscribed before the first message
    "$warren" perf -x 1 -y 0 -s 64 -r "$rate" -z "$seconds" -u "$queue" --json --url "$url" >/dev/null 2>&1
    wait "$consumers"
    echo "{\"driver\":\"$driver\",\"connections\":$connections,\"channels\":$channels,\"result\":$(cat "$out")}"
  done
done
"$warren" delete queue "$queue" --url "$url" >/dev/null
