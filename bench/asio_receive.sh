#!/usr/bin/env bash
# W3 on the Asio driver two ways: through `co_await consumer.receive(...)` and through the
# push callback (bench/asio_receive.cpp), from the same lazy pre-filled queue as
# bench/compare.sh's W3 (N x 64 B, prefetch 500, a multiple ack every 100). The two take
# turns, several rounds; prints each run and the medians of CPU per message and of heap
# allocations per message in steady state, and the receive/push CPU ratio.
#   bench/asio_receive.sh [--rounds N] [--count N]   (default: 5, 200000)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=5
count=200000
while (($#)); do
  case $1 in
    --rounds) rounds=$2; shift 2 ;;
    --count) count=$2; shift 2 ;;
    *) echo "usage: bench/asio_receive.sh [--rounds N] [--count N]" >&2; exit 2 ;;
  esac
done
scripts/setup-deps.sh
[[ -f build-release/build.ninja ]] || meson setup build-release -Dbuildtype=release -Dtests=false >/dev/null
nice ninja -j2 -C build-release tools/warren bench/bench-asio-receive >/dev/null
warren=build-release/tools/warren
bench=build-release/bench/bench-asio-receive

broker_dir=$(mktemp -d /tmp/warren-bench-broker.XXXXXX)
trap 'scripts/broker-stop.sh "$broker_dir" --purge' EXIT
eval "$(scripts/broker-start.sh "$broker_dir" 0 | grep '^RMQ_')"
url="amqp://127.0.0.1:$RMQ_PORT"
queue=bench-asio-receive
results=$(mktemp)

# The same queue as compare.sh's W3: lazy, so it reads back alike every run.
fill_queue() {
  "$warren" delete queue "$queue" --url "$url" >/dev/null
  "$warren" declare queue "$queue" --arg x-queue-mode=lazy --url "$url" >/dev/null
  "$warren" perf -x 1 -y 0 -s 64 -C "$count" -c 1000 -u "$queue" --json --url "$url" >/dev/null
}

modes=(push receive)
for ((r = 0; r < rounds; r++)); do
  echo "round $((r + 1)) of $rounds"
  for ((i = 0; i < ${#modes[@]}; i++)); do
    mode=${modes[(i + r) % ${#modes[@]}]}
    fill_queue
    line=$("$bench" --port "$RMQ_PORT" --queue "$queue" --mode "$mode" --count "$count")
    echo "$line" >>"$results"
    echo "  $mode: $line"
  done
done
"$warren" delete queue "$queue" --url "$url" >/dev/null

/usr/bin/python3 - "$results" <<'PY'
import json, statistics, sys
runs = [json.loads(line) for line in open(sys.argv[1])]
median = {}
for mode in ("push", "receive"):
    mine = [r for r in runs if r["mode"] == mode]
    median[mode] = {k: statistics.median(r[k] for r in mine) for k in ("cpu_us_per_msg", "allocs_per_msg", "receive_rate")}
    m = median[mode]
    print(f"{mode:8} median cpu {m['cpu_us_per_msg']:.3f} us/msg, {m['allocs_per_msg']:.3f} allocations/msg, "
          f"{m['receive_rate']:.0f} msg/s")
print(f"receive / push CPU per message: {median['receive']['cpu_us_per_msg'] / median['push']['cpu_us_per_msg']:.2f}x")
PY
rm -f "$results"
