#!/usr/bin/env bash
# The messaging layer's rates (bench/messaging_bench.cpp) on a throwaway broker, release build,
# libuv driver: work queue throughput with 1 and 4 workers (a quorum queue, prefetch 50 per
# worker, done() at once: the layer and the broker, no work), the confirmed put rate, and the
# log's append rate (each append a confirm plus the read-back of its offset) and read rate
# (catch-up pages from the first entry). Prints a small table and the load average.
#   bench/messaging.sh [--messages N] [--appends N] [--rounds N]   (default 20000, 1000, 3)
set -euo pipefail
cd "$(dirname "$0")/.."
messages=20000
appends=1000
rounds=3
while (($#)); do
  case $1 in
    --messages) messages=$2; shift 2 ;;
    --appends) appends=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    *) echo "usage: bench/messaging.sh [--messages N] [--appends N] [--rounds N]" >&2; exit 2 ;;
  esac
done
[[ -f build-release/build.ninja ]] || meson setup build-release -Dbuildtype=release -Dtests=false >/dev/null
ninja -C build-release bench/messaging-bench >/dev/null
bench=build-release/bench/messaging-bench

broker_dir=$(mktemp -d /tmp/warren-bench-broker.XXXXXX)
trap 'scripts/broker-stop.sh "$broker_dir" --purge >/dev/null 2>&1' EXIT
eval "$(scripts/broker-start.sh "$broker_dir" 0 2>/dev/null | grep '^RMQ_')"
results=$(mktemp)
for ((r = 1; r <= rounds; r++)); do
  echo "round $r of $rounds" >&2
  "$bench" "$RMQ_PORT" "$messages" "$appends" | tee -a "$results" >&2
done
# The median of each measure's rate over the rounds.
echo
echo "| measure | count | per second (median of $rounds) |"
echo "|---|---:|---:|"
for what in work-put work-1-worker work-4-workers log-append log-read; do
  count=$(awk -v w="$what" '$1 == w { print $2; exit }' "$results")
  median=$(awk -v w="$what" '$1 == w { print $4 }' "$results" | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')
  echo "| $what | $count | $median |"
done
echo
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg) ($(nproc) cores, the broker on the same machine)"
rm -f "$results"
