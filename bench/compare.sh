#!/usr/bin/env bash
# The side-by-side benchmark: warren (libuv and Asio drivers) against the clients teams pick
# (amqp091-go, the Java client, amqplib), rabbitmq-c and pika, and the wire floor (no client:
# bench/wire_floor.cpp), on one throwaway broker, the same three workloads, several rounds,
# medians. Writes a Markdown table and a PNG chart.
#   bench/compare.sh [--rounds N] [--count N] [--scale-seconds S] [--io-uring] [--out DIR] [--build DIR]
#                    [--baseline DIR [--pairs N]] [--scale-shapes "CONNECTIONSxCHANNELS ..."]
#                    [--scale-tls-shapes "CONNECTIONSxCHANNELS ..."]
#                    [--scale-idle-seconds S]
#   (default: 5, 200000, 5, no, docs/, build-release). --build names a build directory already
#   built (the test command's smoke round uses its own build instead of compiling a release);
#   figures for docs/ come from the release build.
# --io-uring adds warren-asio-uring: the Asio driver built with -Dasio_io_uring=true (its own
# build, build-release-uring), so io_uring is measured against epoll in the same run.
# W1 publish N x 64 B without confirms to a non-durable queue, until the broker holds them;
# W2 the same with confirms, at most 1,000 unconfirmed, the window topped up once a quarter of
# it is free (every client alike); W3 consume N pre-filled x 64 B with
# prefetch 500 and a multiple ack every 100 (from a lazy queue: see fill_queue). The clients
# take turns in a rotating order. warren-uv-metrics is warren-uv with the client's metrics on
# (`--metrics-listen`: every connection counts into a Metrics, served over HTTP, not scraped),
# and --baseline DIR adds warren-uv-baseline, DIR/tools/warren (another build: warren before a
# change), so what a change costs is measured in one run: it runs in --pairs adjacent pairs
# (default 3) per round and workload with warren-uv (as warren-uv-paired), each pair the other
# way round, and the report compares the two over those pairs. W3 has a fourth client, warren-asio-receive: the same
# consume through `co_await consumer.receive(...)` (bench/asio_receive.cpp), an owned Message
# per delivery, with its heap allocations per message counted; and two in throughput mode
# (warren-uv-batch, warren-asio-batch: `warren perf --read-min-bytes --read-max-wait`), and two
# with read batching off (warren-uv-unbatched, warren-asio-unbatched: `--read-min-bytes 0`),
# beside the default's batching past bursts.
# pika (bench/pika_perf.py) and the peers in bench/peers (amqp091-go, java, amqplib: built by
# bench/peers/build.sh from Debian's packages and npm) move at most 50,000 messages a run: they
# are 5 to 50 times slower, and CPU per message is what is compared. java-warm is the Java
# client after as many messages again unmeasured (the JIT warm); java's rows also give its
# whole process's CPU, JVM start-up included.
# Then, once each: the syscalls per message of every client (strace -c, a quarter of the
# count), the latency of the default and the throughput mode at a rate the broker sustains
# (L), latency by message size (a paced stream, RPC round trips over direct reply-to, a
# prefetch-1 consumer and a basic.get loop of 8 KiB, at default and with batching off:
# --sizes LIST, default 64,1024,4096,16384,65536,262144), and how cost grows with connections
# and channels (bench/scale.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=5
pairs=3  # --baseline: warren-uv and the baseline in this many adjacent pairs per round and workload
count=200000
scale_seconds=5
scale_shapes=  # bench/scale.sh's default: 1 to 10,000 connections, and 1 x 2,000 channels
scale_idle_seconds=10
scale_tls_shapes=  # bench/scale.sh's default: 1 and 1,000 connections over TLS
io_uring=0
out=docs
build=
baseline=
sizes=64,1024,4096,16384,65536,262144
while (($#)); do
  case $1 in
    --rounds) rounds=$2; shift 2 ;;
    --count) count=$2; shift 2 ;;
    --scale-seconds) scale_seconds=$2; shift 2 ;;
    --scale-shapes) scale_shapes=$2; shift 2 ;;
    --scale-idle-seconds) scale_idle_seconds=$2; shift 2 ;;
    --scale-tls-shapes) scale_tls_shapes=$2; shift 2 ;;
    --io-uring) io_uring=1; shift ;;
    --out) out=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --baseline) baseline=$2; shift 2 ;;
    --pairs) pairs=$2; shift 2 ;;
    --sizes) sizes=$2; shift 2 ;;
    *) echo "usage: bench/compare.sh [--rounds N] [--count N] [--scale-seconds S] [--io-uring] [--out DIR] [--build DIR] [--baseline DIR] [--pairs N] [--sizes LIST] [--scale-shapes LIST] [--scale-idle-seconds S] [--scale-tls-shapes LIST]" >&2; exit 2 ;;
  esac
done
scripts/setup-deps.sh
scripts/setup-deps.sh --bench-peers
if [[ -z $build ]]; then
  build=build-release
  [[ -f build-release/build.ninja ]] || meson setup build-release -Dbuildtype=release -Dtests=false >/dev/null
  ninja -C build-release tools/warren bench/rabbitmqc-perf bench/bench-asio-receive bench/wire-floor bench/bench-read-latency >/dev/null
fi
warren=$build/tools/warren
one_at_a_time=$build/bench/bench-read-latency
rmqc=$build/bench/rabbitmqc-perf
receive=$build/bench/bench-asio-receive
floor=$build/bench/wire-floor
peers=$build/peers
bench/peers/build.sh "$peers"
for program in "$warren" "$rmqc" "$receive" "$floor" "$one_at_a_time" "$peers/amqp091-go-perf" "$peers/java-perf" "$peers/amqplib-perf"; do
  [[ -x $program ]] || { echo "compare.sh: $program is not built" >&2; exit 1; }
done
extra_clients=(warren-uv-metrics)
if [[ -n $baseline ]]; then
  [[ -x $baseline/tools/warren ]] || { echo "compare.sh: $baseline/tools/warren is not built" >&2; exit 1; }
  extra_clients+=(warren-uv-baseline)
fi
if ((io_uring)); then
  [[ -f build-release-uring/build.ninja ]] ||
    meson setup build-release-uring -Dbuildtype=release -Dtests=false -Dbench=false -Dasio_io_uring=true >/dev/null
  ninja -C build-release-uring tools/warren >/dev/null
  extra_clients+=(warren-asio-uring)
fi
pika=bench/pika_perf.py
pika_count=$((count < 50000 ? count : 50000))
peer_clients=(amqp091-go java java-warm amqplib)
# Throughput mode for the -batch rows and the latency section; batching off (every readable
# byte read at once, the default before issue 25: consumers' batching and the reads of a deep
# confirm window's confirms) for the -unbatched rows.
batch=(--read-min-bytes 32768 --read-max-wait 2000)
unbatched=(--read-min-bytes 0 --read-owed-confirms 0)

broker_dir=$(mktemp -d /tmp/warren-bench-broker.XXXXXX)
trap 'scripts/broker-stop.sh "$broker_dir" --purge' EXIT
# With a TLS listener: the scale rows measure what OpenSSL adds to an idle connection.
eval "$(scripts/broker-start.sh "$broker_dir" 0 auto | grep '^RMQ_')"
url="amqp://127.0.0.1:$RMQ_PORT"
results=$(mktemp)
syscall_results=$(mktemp)
latency_results=$(mktemp)
size_results=$(mktemp)
scale_results=$(mktemp)

drop_queue() { "$warren" delete queue "$1" --url "$url" >/dev/null; }
# A fresh, non-durable queue for each run, declared the same way whichever client runs
# (--transient: 3.10 takes it, and the figures stay comparable with earlier runs').
reset_queue() {
  drop_queue "$1"
  "$warren" declare queue "$1" --transient "${@:2}" --url "$url" >/dev/null
}
# W3's queue is lazy: a default classic queue holding 200,000 messages was consumed either at
# about 70,000 msg/s or at about 19,000 msg/s from one run to the next, for every client
# alike (the queue moving messages out of memory while it is read), which made the medians a
# coin toss. A lazy queue keeps them on disk from the start and reads back alike every time.
fill_queue() {  # fill_queue QUEUE N
  reset_queue "$1" --arg x-queue-mode=lazy
  "$warren" perf -x 1 -y 0 -s 64 -C "$2" -c 1000 -u "$1" --json --url "$url" >/dev/null 2>&1
}
# command CLIENT WORKLOAD N: the command line of one run of N messages (bench-W* queues).
command_for() {
  local client=$1 workload=$2 n=$3 queue="bench-$2" kind
  case $workload in W1) kind=publish ;; W2) kind=confirm ;; W3) kind=consume ;; esac
  case $client in
    warren-uv | warren-asio | warren-uv-batch | warren-asio-batch | warren-uv-unbatched | warren-asio-unbatched | warren-asio-uring | warren-uv-metrics | warren-uv-baseline | warren-uv-paired)
      local driver=${client#warren-} extra=() warren=$warren
      driver=${driver%-paired}  # warren-uv, run beside warren-uv-baseline (below)
      if [[ $driver == *-batch ]]; then driver=${driver%-batch}; extra=("${batch[@]}"); fi
      if [[ $driver == *-unbatched ]]; then driver=${driver%-unbatched}; extra=("${unbatched[@]}"); fi
      if [[ $driver == *-uring ]]; then driver=${driver%-uring}; warren=build-release-uring/tools/warren; fi
      if [[ $driver == *-metrics ]]; then driver=${driver%-metrics}; extra=(--metrics-listen 127.0.0.1:0); fi
      if [[ $driver == *-baseline ]]; then driver=${driver%-baseline}; warren=$baseline/tools/warren; fi
      case $workload in
        W1) echo "$warren" perf --driver "$driver" -x 1 -y 0 -s 64 -C "$n" -c 0 -u "$queue" "${extra[@]}" --json --url "$url" ;;
        W2) echo "$warren" perf --driver "$driver" -x 1 -y 0 -s 64 -C "$n" -c 1000 -u "$queue" "${extra[@]}" --json --url "$url" ;;
        W3) echo "$warren" perf --driver "$driver" -x 0 -y 1 -D "$n" -q 500 -A 100 -u "$queue" "${extra[@]}" --json --url "$url" ;;
      esac ;;
    rabbitmq-c) echo "$rmqc" --port "$RMQ_PORT" --queue "$queue" --workload "$kind" --count "$n" ;;
    wire-floor) echo "$floor" --port "$RMQ_PORT" --queue "$queue" --workload "$kind" --count "$n" ;;
    amqp091-go | amqplib) echo "$peers/$client-perf" --port "$RMQ_PORT" --queue "$queue" --workload "$kind" --count "$n" ;;
    java) echo "$peers/java-perf" --port "$RMQ_PORT" --queue "$queue" --workload "$kind" --count "$n" ;;
    java-warm) echo "$peers/java-perf" --port "$RMQ_PORT" --queue "$queue" --workload "$kind" --count "$n" --warmup "$n" ;;
    pika) echo /usr/bin/python3 "$pika" --port "$RMQ_PORT" --queue "$queue" --workload "$kind" --count "$n" ;;
    warren-asio-receive) echo "$receive" --port "$RMQ_PORT" --queue "$queue" --mode receive --count "$n" ;;
  esac
}

messages_for() {
  case $1 in
    pika | amqp091-go | java | java-warm | amqplib) echo "$pika_count" ;;
    *) echo "$count" ;;
  esac
}
# What a run moves before it measures: java-warm's warm-up is as many messages again (W3's
# queue holds both).
unmeasured_for() { [[ $1 == java-warm ]] && messages_for "$1" || echo 0; }

prepare() {  # prepare WORKLOAD N: the queue as the workload starts
  case $1 in
    W1 | W2) reset_queue "bench-$1" ;;
    W3) fill_queue "bench-$1" "$2" ;;
  esac
}

# run CLIENT WORKLOAD: one measured run; appends {"client","workload",...} to the results.
run() {
  local client=$1 workload=$2 n line
  n=$(messages_for "$client")
  prepare "$workload" "$((n + $(unmeasured_for "$client")))"
  # shellcheck disable=SC2046  # the command line is words, none with spaces
  line=$($(command_for "$client" "$workload" "$n") 2>/dev/null)
  echo "{\"client\":\"$client\",\"workload\":\"$workload\",\"result\":$line}" >>"$results"
  echo "  $client $workload: $line"
}

# syscalls CLIENT WORKLOAD: the same run under strace -f -c, a quarter of the messages; appends
# {"client","workload","syscalls":{name: calls},"messages"}. Start-up and connection set-up are
# counted too (a few hundred calls).
syscalls() {
  local client=$1 workload=$2 n trace
  n=$(messages_for "$client")
  n=$((n / 4 > 0 ? n / 4 : 1))
  prepare "$workload" "$n"
  trace=$(mktemp)
  # shellcheck disable=SC2046
  strace -f -c -o "$trace" $(command_for "$client" "$workload" "$n") >/dev/null 2>&1
  /usr/bin/python3 - "$client" "$workload" "$n" "$trace" >>"$syscall_results" <<'PY'
import json, sys
client, workload, n, path = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
calls = {}
for line in open(path):
    f = line.split()
    if len(f) >= 5 and f[0][0].isdigit() and f[-1] != "total":
        calls[f[-1]] = int(f[3])
print(json.dumps({"client": client, "workload": workload, "messages": n, "syscalls": calls}))
PY
  rm -f "$trace"
  echo "  syscalls: $client $workload"
}

for ((r = 0; r < rounds; r++)); do
  echo "round $((r + 1)) of $rounds"
  for w in W1 W2 W3; do
    clients=(warren-uv warren-asio rabbitmq-c pika wire-floor "${peer_clients[@]}")
    for c in "${extra_clients[@]}"; do [[ $c == warren-uv-baseline ]] || clients+=("$c"); done
    [[ $w == W2 ]] && clients+=(warren-uv-unbatched warren-asio-unbatched)
    [[ $w == W3 ]] && clients+=(warren-asio-receive warren-uv-batch warren-asio-batch warren-uv-unbatched warren-asio-unbatched)
    for ((i = 0; i < ${#clients[@]}; i++)); do
      run "${clients[(i + r) % ${#clients[@]}]}" "$w"
    done
    # With --baseline: the two builds in adjacent pairs, each pair the other way round, so
    # both see the same moment of a noisy host (a rotation puts a dozen runs between them).
    if [[ -n $baseline ]]; then
      for ((p = 0; p < pairs; p++)); do
        if (((p + r) % 2 == 0)); then run warren-uv-paired "$w"; run warren-uv-baseline "$w"
        else run warren-uv-baseline "$w"; run warren-uv-paired "$w"; fi
      done
    fi
  done
done
echo "syscalls per message"
for w in W1 W2 W3; do
  # warren-uv-metrics and -baseline make the same calls as warren-uv: counted once.
  # The JVM under strace -f is another program (its threads' safepoints): not counted.
  clients=(warren-uv warren-asio rabbitmq-c pika wire-floor amqp091-go amqplib)
  for c in "${extra_clients[@]}"; do [[ $c == warren-uv-metrics || $c == warren-uv-baseline ]] || clients+=("$c"); done
  [[ $w == W2 ]] && clients+=(warren-uv-unbatched warren-asio-unbatched)
  [[ $w == W3 ]] && clients+=(warren-uv-batch warren-asio-batch warren-uv-unbatched warren-asio-unbatched)
  for c in "${clients[@]}"; do syscalls "$c" "$w"; done
done
for q in bench-W1 bench-W2 bench-W3; do drop_queue "$q"; done

# L: one producer and one consumer in one process at 10,000 msg/s (a rate the broker keeps
# up with, so the latency is the clients' and not a queue's), default and throughput mode.
echo "latency at a sustained rate"
latency_seconds=$((scale_seconds > 2 ? scale_seconds : 2))
for client in warren-uv warren-uv-unbatched warren-uv-batch warren-asio warren-asio-unbatched warren-asio-batch; do
  driver=${client#warren-}
  extra=()
  if [[ $driver == *-batch ]]; then driver=${driver%-batch}; extra=("${batch[@]}"); fi
  if [[ $driver == *-unbatched ]]; then driver=${driver%-unbatched}; extra=("${unbatched[@]}"); fi
  reset_queue bench-L
  line=$("$warren" perf --driver "$driver" -x 1 -y 1 -s 64 -r 10000 -z "$latency_seconds" -q 500 -A 100 -u bench-L \
    "${extra[@]}" --json --url "$url" 2>/dev/null)
  echo "{\"client\":\"$client\",\"result\":$line}" >>"$latency_results"
  echo "  $client L: $line"
done
# The peers the same way: one producer and one consumer (two channels of one connection), paced
# at 10,000 msg/s; java-warm after as many seconds' worth unmeasured.
for client in amqp091-go java-warm amqplib; do
  program=$peers/${client%-warm}-perf
  extra=()
  [[ $client == java-warm ]] && extra=(--warmup $((10000 * latency_seconds)))
  reset_queue bench-L
  line=$("$program" --port "$RMQ_PORT" --queue bench-L --workload latency --rate 10000 --seconds "$latency_seconds" \
    "${extra[@]}" 2>/dev/null)
  echo "{\"client\":\"$client\",\"result\":$line}" >>"$latency_results"
  echo "  $client L: $line"
done
drop_queue bench-L

# Latency by message size (issue 37): read batching must cost a paced stream, a reply, a
# prefetch-1 consumer and a get loop nothing at any size. Each warren client at default and
# with batching off (-unbatched), both drivers; the peers where their programs can (a paced
# stream: --workload latency --size; RPC: --workload rpc --size). 200 msg/s: 51 MB/s at 256 KiB, far from the broker's
# limit, so the latency is the clients'. Five rounds, the clients in another order each time,
# and the report takes each cell's median: one run's p50 moves by tens of µs on this machine,
# more than batching may cost.
echo "latency by size"
size_rate=200
size_rounds=$((rounds < 5 ? rounds : 5))
rpc_calls=3000  # p99 is then the 30th-slowest call, not the 10th
size_record() {  # size_record KIND SIZE CLIENT LINE
  echo "{\"kind\":\"$1\",\"size\":$2,\"client\":\"$3\",\"result\":$4}" >>"$size_results"
  echo "  $1 $2 B $3: $4"
}
"$warren" rpc serve --queue bench-rpc --url "$url" >/dev/null 2>&1 &
rpc_server=$!
for ((sr = 0; sr < size_rounds; sr++)); do
 # Every other round the other driver first.
 if ((sr % 2)); then warren_drivers=(asio uv); else warren_drivers=(uv asio); fi
 for size in ${sizes//,/ }; do
  # warren's paced stream: default and off at the same time in one process, each consumer on
  # its own connection and queue, their messages half a period apart (bench/read_latency.cpp):
  # run as two processes at different times, the two settings' p50s spread 125-373 µs
  # from round to round where both read alike. Each at half the rate, so the pair moves the
  # bytes a second a peer's run does (at the full rate each, twice the load raised both p99s
  # at 64 and 256 KiB above the peers'), over twice the time, so each has as many messages.
  for driver in ${warren_drivers[@]}; do
    mapfile -t lines < <("$one_at_a_time" --port "$RMQ_PORT" --queue bench-S --mode stream --size "$size" \
      --count $((size_rate * latency_seconds)) --rate $((size_rate / 2)) --driver "$driver" --batching both)
    size_record stream "$size" "warren-$driver" "${lines[0]}"
    size_record stream "$size" "warren-$driver-unbatched" "${lines[1]}"
    # And the default alone, measured as a peer's is (one consumer at the full rate for as long):
    # its p99 is the one set beside the peers'.
    line=$("$one_at_a_time" --port "$RMQ_PORT" --queue bench-S --mode stream --size "$size" \
      --count $((size_rate * latency_seconds)) --rate "$size_rate" --driver "$driver" --batching default)
    size_record stream "$size" "warren-$driver-alone" "$line"
  done
  for client in amqp091-go java-warm amqplib; do
    program=$peers/${client%-warm}-perf
    extra=()
    [[ $client == java-warm ]] && extra=(--warmup $((size_rate * latency_seconds)))
    reset_queue bench-S
    line=$("$program" --port "$RMQ_PORT" --queue bench-S --workload latency --rate "$size_rate" --seconds "$latency_seconds" \
      --size "$size" "${extra[@]}" 2>/dev/null)
    size_record stream "$size" "$client" "$line"
  done
  # RPC: default and off take turns in one process, 100 calls at a time (bench/read_latency.cpp).
  for driver in uv asio; do
    mapfile -t lines < <("$one_at_a_time" --port "$RMQ_PORT" --queue bench-rpc --mode rpc --size "$size" \
      --count "$rpc_calls" --driver "$driver" --batching both)
    size_record rpc "$size" "warren-$driver" "${lines[0]}"
    size_record rpc "$size" "warren-$driver-unbatched" "${lines[1]}"
  done
  for client in amqp091-go java-warm amqplib; do
    program=$peers/${client%-warm}-perf
    extra=()
    [[ $client == java-warm ]] && extra=(--warmup "$rpc_calls")
    line=$("$program" --port "$RMQ_PORT" --queue bench-rpc --workload rpc --count "$rpc_calls" --size "$size" "${extra[@]}" 2>/dev/null)
    size_record rpc "$size" "$client" "$line"
  done
 done
done
kill "$rpc_server" 2>/dev/null || true
wait "$rpc_server" 2>/dev/null || true
# One 8 KiB message a read: a prefetch-1 consumer and a basic.get loop, 2,000 each, default and
# off taking turns in one process (one process's rate moved by 25% from run to run here).
for ((sr = 0; sr < size_rounds; sr++)); do
 for mode in prefetch1 get; do
  for driver in uv asio; do
    reset_queue bench-S
    "$warren" perf -x 1 -y 0 -s 8192 -C 4000 -c 1000 -u bench-S --json --url "$url" >/dev/null 2>&1
    mapfile -t lines < <("$one_at_a_time" --port "$RMQ_PORT" --queue bench-S --mode "$mode" --size 8192 --count 2000 \
      --driver "$driver" --batching both)
    size_record "$mode" 8192 "warren-$driver" "${lines[0]}"
    size_record "$mode" 8192 "warren-$driver-unbatched" "${lines[1]}"
  done
 done
done
drop_queue bench-S
drop_queue bench-rpc

echo "scale"
bench/scale.sh --warren "$warren" --url "$url" --seconds "$scale_seconds" --idle-seconds "$scale_idle_seconds" \
  ${scale_shapes:+--shapes "$scale_shapes"} --tls-url "amqps://guest:guest@localhost:$RMQ_TLS_PORT" --ca "$RMQ_CA" \
  ${scale_tls_shapes:+--tls-shapes "$scale_tls_shapes"} >"$scale_results"

mkdir -p "$out"
# The 1-minute load average as the runs end: other work on the machine (a build, say) raises
# every client's CPU per message, so the report says how busy the machine was.
/usr/bin/python3 bench/compare_report.py "$results" "$syscall_results" "$latency_results" "$size_results" "$scale_results" \
  "$out" "$rounds" "$count" "$pika_count" \
  "$("$RMQ_CTL" version 2>/dev/null)" "$("$RMQ_CTL" eval 'erlang:system_info(otp_release).' 2>/dev/null | tr -d '"')" \
  "$(cut -d' ' -f1 /proc/loadavg)"
rm -f "$results" "$syscall_results" "$latency_results" "$size_results" "$scale_results"
