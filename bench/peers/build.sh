#!/usr/bin/env bash
# bench/peers/build.sh OUTDIR: builds the benchmark's peer programs, each run as PROGRAM ARGS...
# with rabbitmqc-perf's arguments (bench/compare.sh):
#   OUTDIR/amqp091-go-perf  amqp091-go (bench/peers/go/perf.go), Debian's golang-github-rabbitmq-amqp091-go-dev
#                           in GOPATH mode: no module download
#   OUTDIR/java-perf        the RabbitMQ Java client (bench/peers/java/Perf.java, compiled into
#                           OUTDIR/java), Debian's librabbitmq-client-java with slf4j-api (the
#                           client logs through it) and slf4j-nop (no "no binding" warning)
#   OUTDIR/amqplib-perf     node's amqplib (bench/peers/node/perf.js), npm ci from
#                           package-lock.json into bench/peers/node/node_modules (needs the npm
#                           registry the first time)
# Idempotent: the Go build is cached, javac runs when Perf.java changed, npm ci when the lock
# file did. Exits non-zero, saying what is missing, when a toolchain or library is not there
# (scripts/setup-deps.sh installs them).
set -euo pipefail
(($# == 1)) || { echo "usage: bench/peers/build.sh OUTDIR" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd -P)
mkdir -p "$1"
out=$(cd "$1" && pwd -P)
die() { echo "peers/build.sh: $*" >&2; exit 1; }
need() {  # need COMMAND DEBIAN-PACKAGE
  command -v "$1" >/dev/null || die "$1 is missing (Debian: apt-get install $2)"
}
need_file() {  # need_file PATH DEBIAN-PACKAGE
  [[ -f $1 ]] || die "$1 is missing (Debian: apt-get install $2)"
}
write_wrapper() {  # write_wrapper PATH COMMAND...: a script that runs COMMAND... "$@"
  local tmp word q="'"
  tmp=$(mktemp "$1.XXXXXX")
  {
    echo '#!/bin/sh'
    printf 'exec'
    for word in "${@:2}"; do printf " '%s'" "${word//$q/$q\\$q$q}"; done
    echo ' "$@"'
  } >"$tmp"
  chmod 755 "$tmp"
  mv -f "$tmp" "$1"
}

# amqp091-go
need go golang-go
need_file /usr/share/gocode/src/github.com/rabbitmq/amqp091-go/channel.go golang-github-rabbitmq-amqp091-go-dev
(cd "$here/go" &&
  GO111MODULE=off GOPATH="$out/gopath:/usr/share/gocode" GOPROXY=off GOFLAGS='' GOCACHE="$out/go-cache" \
    go build -o "$out/amqp091-go-perf" perf.go) || die "go build of bench/peers/go/perf.go failed"

# The Java client
need java openjdk-17-jre-headless
need javac openjdk-17-jdk-headless
amqp_jar=/usr/share/java/amqp-client.jar
slf4j_api=/usr/share/java/slf4j-api.jar
slf4j_nop=/usr/share/java/slf4j-nop.jar
need_file "$amqp_jar" librabbitmq-client-java
need_file "$slf4j_api" libslf4j-java
need_file "$slf4j_nop" libslf4j-java
if [[ ! -f $out/java/Perf.class || $here/java/Perf.java -nt $out/java/Perf.class ]]; then
  rm -rf "$out/java"
  mkdir -p "$out/java"
  javac -d "$out/java" -cp "$amqp_jar" "$here/java/Perf.java" || die "javac of bench/peers/java/Perf.java failed"
fi
write_wrapper "$out/java-perf" java -cp "$out/java:$amqp_jar:$slf4j_api:$slf4j_nop" Perf

# amqplib
need node nodejs
need npm npm
want=$(sha256sum <"$here/node/package-lock.json" | cut -d' ' -f1)
stamp=$here/node/node_modules/.warren-lock.sha256
if [[ ! -f $stamp || $(cat "$stamp") != "$want" ]]; then
  (cd "$here/node" && npm ci --no-audit --no-fund --loglevel=error >/dev/null) ||
    die "npm ci in bench/peers/node failed (it needs the npm registry)"
  echo "$want" >"$stamp"
fi
write_wrapper "$out/amqplib-perf" node "$here/node/perf.js"
