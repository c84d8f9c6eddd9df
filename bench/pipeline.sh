#!/bin/sh
# Records per second through a pass-through pipeline (queue -> exchange, confirms on) beside
# the broker's own ceiling in the same run: warren perf publishing with confirms and consuming
# the same number of messages of the same size.
#   bench/pipeline.sh BUILD_DIR PORT [RECORDS] [BODY_BYTES] [CONCURRENCY]
set -eu
build=$1 port=$2 records=${3:-20000} size=${4:-64} concurrency=${5:-250}
url="amqp://guest:guest@127.0.0.1:$port"
echo "warren perf (publish with confirms, 1000 in flight, then consume):"
"$build/tools/warren" perf --url "$url" -x 1 -y 0 -s "$size" -C "$records" -c 1000 -u warren-bench-perf --json
"$build/tools/warren" perf --url "$url" -x 0 -y 1 -D "$records" -q "$concurrency" -u warren-bench-perf --json
"$build/tools/warren" delete queue warren-bench-perf --url "$url" >/dev/null
for driver in uv asio; do
  echo "pipeline pass-through ($driver):"
  "$build/bench/pipeline-passthrough" "$port" "$records" "$size" "$concurrency" "$driver"
done
