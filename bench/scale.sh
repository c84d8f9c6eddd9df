#!/usr/bin/env bash
# How a consumer's cost grows with the work (part of bench/compare.sh): consuming connections
# of one channel each (1 to 10,000 by default), and one connection with many channels, all
# fed by one producer process at the same total rate, on both drivers. Each consumer process
# first holds every connection idle for --idle-seconds with heartbeats on (its CPU, wake-ups
# and RSS then: what an idle connection costs), then is fed. One JSON line per run:
#   {"driver", "connections", "channels", "heartbeat_s", "result": <the consumer process's warren perf line>}
#   bench/scale.sh --warren BIN --url URL [--seconds S] [--rate MSGS_PER_S] [--idle-seconds S]
#                  [--heartbeat S] [--shapes "CONNECTIONSxCHANNELS ..."]
#                  [--tls-url AMQPS_URL --ca PEM_FILE [--tls-shapes "CONNECTIONSxCHANNELS ..."]]
#                  [--drivers "uv asio"]
# With --tls-url the consumers of --tls-shapes (default "1x1 1000x1") also dial the broker's
# TLS listener, trusting --ca (as the system's trust store: SSL_CERT_FILE), reported as driver
# "uv+tls" and "asio+tls": what OpenSSL adds to an idle connection. The producer stays plain.
# The consumer process runs alone (no producer in it), so its CPU and RSS are the consumers'
# own. The producer starts once the consumer process says it is measuring (its "measuring:"
# line), and the consumers run a second longer than it.
set -euo pipefail
warren= url= seconds=5 rate=10000 idle_seconds=10 heartbeat=10
shapes="1x1 10x1 100x1 1000x1 10000x1 1x100 1x2000"
tls_url= ca= tls_shapes="1x1 1000x1"
drivers="uv asio"
while (($#)); do
  case $1 in
    --warren) warren=$2; shift 2 ;;
    --url) url=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --idle-seconds) idle_seconds=$2; shift 2 ;;
    --heartbeat) heartbeat=$2; shift 2 ;;
    --shapes) shapes=$2; shift 2 ;;
    --tls-url) tls_url=$2; shift 2 ;;
    --ca) ca=$2; shift 2 ;;
    --tls-shapes) tls_shapes=$2; shift 2 ;;
    --drivers) drivers=$2; shift 2 ;;
    *) echo "usage: bench/scale.sh --warren BIN --url URL [--seconds S] [--rate N] [--idle-seconds S] [--heartbeat S] [--shapes LIST] [--tls-url URL --ca FILE [--tls-shapes LIST]] [--drivers LIST]" >&2; exit 2 ;;
  esac
done
[[ -n $warren && -n $url ]] || { echo "bench/scale.sh: --warren and --url are required" >&2; exit 2; }
[[ -z $tls_url || -s $ca ]] || { echo "bench/scale.sh: --tls-url needs --ca, a PEM file" >&2; exit 2; }
# A descriptor per connection: as many as the hard limit allows.
ulimit -n "$(ulimit -Hn)"
queue=bench-scale
out=$(mktemp) err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT
# Each run: DRIVER LABEL SHAPE URL. The TLS runs after the plain ones, per driver.
runs=()
for driver in $drivers; do
  for shape in $shapes; do runs+=("$driver $driver $shape $url"); done
  if [[ -n $tls_url ]]; then
    for shape in $tls_shapes; do runs+=("$driver $driver+tls $shape $tls_url"); done
  fi
done
for run in "${runs[@]}"; do
  read -r driver label shape consumer_url <<<"$run"
  connections=${shape%x*} channels=${shape#*x}
  for try in 1 2; do
    # A fresh queue. After 10,000 connections the broker is still closing them for a while,
    # and its answer may take longer than a request's timeout: asked again, up to 5 times.
    for attempt in 1 2 3 4 5; do
      "$warren" delete queue "$queue" --url "$url" >/dev/null && "$warren" declare queue "$queue" --url "$url" >/dev/null && break
      ((attempt < 5)) || { echo "bench/scale.sh: the broker did not make a fresh $queue" >&2; exit 1; }
    done
    # Emptied here, not by the background job's redirection: that happens in the child, maybe
    # after the loop below has read the last run's "measuring:" line from the same file and fed
    # this run while it was still setting up (the uv 1 x 2,000 row of d114c14's run was that).
    : >"$err"
    cert_env=()  # the TLS runs trust --ca as the system's store
    [[ $label == *+tls ]] && cert_env=("SSL_CERT_FILE=$ca")
    env "${cert_env[@]}" "$warren" perf --driver "$driver" -x 0 -y "$connections" -Y "$channels" -q 100 -A 10 \
      -u "$queue" --idle-seconds "$idle_seconds" -z "$((seconds + 1))" --json --url "$consumer_url?heartbeat=$heartbeat" \
      >"$out" 2>>"$err" &
    consumers=$!
    # Fed once every subscription is made and the idle phase is over.
    until grep -q '^measuring:' "$err"; do
      if ! kill -0 "$consumers" 2>/dev/null; then
        wait "$consumers" || true
        echo "bench/scale.sh: the consumer process ($label, $shape) ended before measuring:" >&2
        cat "$err" >&2
        # A TLS row that cannot run is said and left out: the plain rows (and the whole
        # compare.sh run around them) still stand. A plain row is tried once more: with
        # 10,000 connections dialling, the broker has answered a consume after more than
        # the client's 10 s (on this machine: the uv row of one run, the asio row of the next).
        [[ $label == *+tls ]] && continue 3
        if ((try < 2)); then
          echo "bench/scale.sh: trying $label $shape once more, in 30 s (the broker closing the last connections)" >&2
          sleep 30
          continue 2
        fi
        exit 1
      fi
      sleep 0.1
    done
    "$warren" perf -x 1 -y 0 -s 64 -r "$rate" -z "$seconds" -u "$queue" --json --url "$url" >/dev/null 2>&1
    wait "$consumers"
    echo "{\"driver\":\"$label\",\"connections\":$connections,\"channels\":$channels,\"heartbeat_s\":$heartbeat,\"result\":$(cat "$out")}"
    break
  done
done
"$warren" delete queue "$queue" --url "$url" >/dev/null
