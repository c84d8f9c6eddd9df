#!/usr/bin/env bash
# warren's main job, from a fresh Debian 12 machine: install what is missing, build, start a
# throwaway RabbitMQ on loopback, run the demo against it (publish confirmed messages, consume
# them, RPC over direct reply-to, on the libuv client), and stop the broker again.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup-deps.sh
[[ -f build/build.ninja ]] || meson setup build >/dev/null
ninja -C build tools/warren-demo >/dev/null
broker_dir=$(mktemp -d /tmp/warren-demo-broker.XXXXXX)
trap 'scripts/broker-stop.sh "$broker_dir" --purge' EXIT
source <(scripts/broker-start.sh "$broker_dir" 0)
build/tools/warren-demo --url "amqp://guest:guest@127.0.0.1:$RMQ_PORT/%2f" "$@"
