#!/usr/bin/env bash
# The side-by-side benchmark: warren (libuv and Asio drivers) and rabbitmq-c on one throwaway
# broker, the same three workloads, several rounds, medians. Writes a Markdown table and a
# PNG chart.
#   bench/compare.sh [--rounds N] [--count N] [--out DIR]   (default: 5, 200000, docs/)
# W1 publish N x 64 B without confirms to a non-durable queue, until the broker holds them;
# W2 the same with confirms, at most 1,000 unconfirmed; W3 consume N pre-filled x 64 B with
# prefetch 500 and a multiple ack every 100 (from a lazy queue: see fill_queue). The clients
# take turns in a rotating order. W3 has a fourth client, warren-asio-receive: the same
# consume through `co_await consumer.receive(...)` (bench/asio_receive.cpp), an owned Message
# per delivery, with its heap allocations per message counted.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=5
count=200000
out=docs
while (($#)); do
  case $1 in
    --rounds) rounds=$2; shift 2 ;;
    --count) count=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "usage: bench/compare.sh [--rounds N] [--count N] [--out DIR]" >&2; exit 2 ;;
  esac
done
scripts/setup-deps.sh
[[ -f build-release/build.ninja ]] || meson setup build-release -Dbuildtype=release -Dtests=false >/dev/null
ninja -C build-release tools/warren bench/rabbitmqc-perf bench/bench-asio-receive >/dev/null
warren=build-release/tools/warren
rmqc=build-release/bench/rabbitmqc-perf
receive=build-release/bench/bench-asio-receive

broker_dir=$(mktemp -d /tmp/warren-bench-broker.XXXXXX)
trap 'scripts/broker-stop.sh "$broker_dir" --purge' EXIT
eval "$(scripts/broker-start.sh "$broker_dir" 0 | grep '^RMQ_')"
url="amqp://127.0.0.1:$RMQ_PORT"
results=$(mktemp)

drop_queue() { "$warren" delete queue "$1" --url "$url" >/dev/null; }
# A fresh, non-durable queue for each run, declared the same way whichever client runs.
reset_queue() {
  drop_queue "$1"
  "$warren" declare queue "$1" "${@:2}" --url "$url" >/dev/null
}
# W3's queue is lazy: a default classic queue holding 200,000 messages was consumed either at
# about 70,000 msg/s or at about 19,000 msg/s from one run to the next, for every client
# alike (the queue moving messages out of memory while it is read), which made the medians a
# coin toss. A lazy queue keeps them on disk from the start and reads back alike every time.
fill_queue() {
  reset_queue "$1" --arg x-queue-mode=lazy
  "$warren" perf -x 1 -y 0 -s 64 -C "$count" -c 1000 -u "$1" --json --url "$url" >/dev/null
}
# run CLIENT WORKLOAD: one measured run; appends {"client","workload",...} to the results.
run() {
  local client=$1 workload=$2 queue="bench-$2" line
  case $workload in
    W1) reset_queue "$queue" ;;
    W2) reset_queue "$queue" ;;
    W3) fill_queue "$queue" ;;
  esac
  case $client in
    warren-uv | warren-asio)
      local driver=${client#warren-}
      case $workload in
        W1) line=$("$warren" perf --driver "$driver" -x 1 -y 0 -s 64 -C "$count" -c 0 -u "$queue" --json --url "$url") ;;
        W2) line=$("$warren" perf --driver "$driver" -x 1 -y 0 -s 64 -C "$count" -c 1000 -u "$queue" --json --url "$url") ;;
        W3) line=$("$warren" perf --driver "$driver" -x 0 -y 1 -D "$count" -q 500 -A 100 -u "$queue" --json --url "$url") ;;
      esac ;;
    rabbitmq-c)
      local kind
      case $workload in W1) kind=publish ;; W2) kind=confirm ;; W3) kind=consume ;; esac
      line=$("$rmqc" --port "$RMQ_PORT" --queue "$queue" --workload "$kind" --count "$count") ;;
    warren-asio-receive)
      line=$("$receive" --port "$RMQ_PORT" --queue "$queue" --mode receive --count "$count") ;;
  esac
  echo "{\"client\":\"$client\",\"workload\":\"$workload\",\"result\":$line}" >>"$results"
  echo "  $client $workload: $line"
}

for ((r = 0; r < rounds; r++)); do
  echo "round $((r + 1)) of $rounds"
  for w in W1 W2 W3; do
    clients=(warren-uv warren-asio rabbitmq-c)
    [[ $w == W3 ]] && clients+=(warren-asio-receive)
    for ((i = 0; i < ${#clients[@]}; i++)); do
      run "${clients[(i + r) % ${#clients[@]}]}" "$w"
    done
  done
done
for q in bench-W1 bench-W2 bench-W3; do drop_queue "$q"; done

mkdir -p "$out"
# The 1-minute load average as the runs end: other work on the machine (a build, say) raises
# every client's CPU per message, so the report says how busy the machine was.
/usr/bin/python3 bench/compare_report.py "$results" "$out" "$rounds" "$count" \
  "$("$RMQ_CTL" version 2>/dev/null)" "$("$RMQ_CTL" eval 'erlang:system_info(otp_release).' 2>/dev/null | tr -d '"')" \
  "$(cut -d' ' -f1 /proc/loadavg)"
rm -f "$results"
