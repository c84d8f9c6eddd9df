#!/usr/bin/env bash
# Installs what warren builds, tests and demos with, from Debian 12's packages, when missing.
# Safe to run twice. Must run as root (apt-get). Keeps the package's own RabbitMQ service from
# starting: warren's scripts start throwaway nodes of their own.
set -euo pipefail

# --bench-peers: only the benchmark's peer clients (bench/peers: amqp091-go, the Java client),
# which bench/compare.sh needs and nothing else does; the test command installs them beside
# its build rather than before it.
if [[ ${1:-} == --bench-peers ]]; then
  packages=(golang-go golang-github-rabbitmq-amqp091-go-dev librabbitmq-client-java libslf4j-java openjdk-17-jdk-headless)
else
  packages=(
    g++ meson ninja-build pkg-config cmake python3 python3-pika
    libuv1-dev libasio-dev libssl-dev libgtest-dev libgmock-dev librapidcheck-dev libbenchmark-dev
    libcli11-dev nlohmann-json3-dev python3-prometheus-client librabbitmq-dev gnuplot-nox strace liburing-dev
    clang-14 libclang-rt-14-dev llvm-14
    rabbitmq-server socat openssl gcovr
  )
fi
# The trace-context interop test's node peer (tests/interop/otel) and the benchmark's amqplib
# peer: Debian's nodejs (18.19) and npm, unless a node with npm is already there (NodeSource's nodejs bundles its npm and
# conflicts with Debian's).
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then packages+=(nodejs npm); fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  exit 0
fi
if [[ $(id -u) != 0 ]]; then
  echo "setup-deps: missing packages (${missing[*]}); run as root to install them" >&2
  exit 1
fi
echo "setup-deps: installing ${missing[*]}" >&2
# The rabbitmq-server package starts a system node on 5672 unless policy-rc.d says no.
made_policy=0
if [[ ! -e /usr/sbin/policy-rc.d ]]; then
  printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
  chmod +x /usr/sbin/policy-rc.d
  made_policy=1
fi
trap '[[ $made_policy == 1 ]] && rm -f /usr/sbin/policy-rc.d' EXIT
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
