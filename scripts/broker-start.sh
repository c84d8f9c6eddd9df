#!/usr/bin/env bash
# Starts a throwaway RabbitMQ node on loopback with all its state in DIR, without systemd.
# Usage: broker-start.sh DIR [PORT] [TLS_PORT]   (PORT 0 or absent: pick a free one;
#        TLS_PORT absent or 0: no TLS listener; "auto": pick a free one)
# Writes DIR/broker.env (RMQ_NODE RMQ_PORT RMQ_TLS_PORT RMQ_DIR RMQ_PID RMQ_CTL [RMQ_CA]) and
# prints it. When TLS_PORT is given, a CA, a server certificate (localhost, 127.0.0.1) and a
# client certificate are generated in DIR/tls. With RMQ_TLS_EXPIRED=1 the listener serves a
# server certificate from the same CA that expired in 2020 (for the tests that must refuse it).
# With RMQ_KEEP_DATA=1 the node keeps what an earlier start of DIR stored (a restart).
# WARREN_BROKER_ERL_ARGS is added to the Erlang VM's arguments (the test command turns off the
# schedulers' busy waiting with it).
# With RMQ_OAUTH2_KEY=KEY the node also takes OAuth 2 access tokens as passwords
# (rabbitmq_auth_backend_oauth2 before the internal backend, so guest and the other users still
# log in): JWTs signed with HS256 by KEY, audience and resource server "rabbitmq", scopes
# "rabbitmq.<permission>:<vhost>/<resource>".
set -euo pipefail
DIR=$(realpath -m "${1:?usage: broker-start.sh DIR [PORT] [TLS_PORT]}")
PORT=${2:-0}
TLS_PORT=${3:-0}
# As root, /usr/sbin/rabbitmq* switch to the rabbitmq user (another HOME and Erlang cookie);
# the tools under /usr/lib/rabbitmq/bin run as we are, with HOME pointing at DIR.
SBIN=/usr/lib/rabbitmq/bin
mkdir -p "$DIR"

in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
# The node's Erlang distribution port, outside the kernel's ephemeral range (32768-60999 here):
# PORT + 20000 lay inside it, and a node failed to boot (dist_port_already_used) when an
# outgoing connection's local port happened to be that number, which a listen probe cannot see.
dist_port() { if (($1 >= 11024)); then echo $(($1 - 10000)); else echo $(($1 + 20000)); fi; }
free_port() {
  local p=$1
  while in_use "$p" || in_use "$(dist_port "$p")"; do p=$((p + 1)); done
  echo "$p"
}
# The node is NAME@localhost, so localhost must resolve (minimal images lack /etc/hosts).
getent hosts localhost >/dev/null || echo "127.0.0.1 localhost" >> /etc/hosts

if [[ -f $DIR/broker.env ]]; then
  source "$DIR/broker.env"
  if kill -0 "$RMQ_PID" 2>/dev/null && "$RMQ_CTL" -q await_startup -t 10 >/dev/null 2>&1; then
    cat "$DIR/broker.env"
    exit 0
  fi
  kill "$RMQ_PID" 2>/dev/null || true
  rm -f "$DIR/broker.env"
fi

[[ $PORT == 0 ]] && PORT=$((25672 + RANDOM % 2000))
PORT=$(free_port "$PORT")
[[ $TLS_PORT == auto ]] && TLS_PORT=$((PORT + 1))
if [[ $TLS_PORT != 0 ]]; then
  TLS_PORT=$(free_port "$TLS_PORT")
  while ((TLS_PORT == PORT || TLS_PORT == $(dist_port "$PORT"))); do TLS_PORT=$(free_port $((TLS_PORT + 1))); done
fi
NODE="warren${PORT}@localhost"

# RMQ_KEEP_DATA=1 restarts a node with its data (durable queues, persistent messages, users);
# otherwise every start is a fresh node.
if [[ ${RMQ_KEEP_DATA:-0} != 1 ]]; then rm -rf "$DIR/mnesia"; fi
rm -rf "$DIR/log"
mkdir -p "$DIR/mnesia" "$DIR/log" "$DIR/conf.d"
[[ -s $DIR/.erlang.cookie ]] || (umask 077; openssl rand -hex 20 > "$DIR/.erlang.cookie")
chmod 400 "$DIR/.erlang.cookie"
: > "$DIR/rabbitmq-env.conf"
cat > "$DIR/rabbitmq.conf" <<CONF
listeners.tcp.1 = 127.0.0.1:$PORT
log.console = false
log.file.level = info
disk_free_limit.absolute = 50MB
CONF
plugins="[]."
if [[ $TLS_PORT != 0 ]]; then
  T=$DIR/tls
  mkdir -p "$T"
  if [[ ! -s $T/client.pem ]]; then
    ossl() { openssl "$@" 2>/dev/null; }
    ossl req -x509 -newkey rsa:2048 -nodes -days 30 -subj /CN=warren-test-ca -keyout "$T/ca.key" -out "$T/ca.pem"
    ossl req -newkey rsa:2048 -nodes -subj /CN=localhost -keyout "$T/server.key" -out "$T/server.csr"
    printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' > "$T/server.ext"
    ossl x509 -req -in "$T/server.csr" -CA "$T/ca.pem" -CAkey "$T/ca.key" -CAcreateserial -days 30 \
      -extfile "$T/server.ext" -out "$T/server.pem"
    ossl req -newkey rsa:2048 -nodes -subj /CN=tls-client -keyout "$T/client.key" -out "$T/client.csr"
    printf 'extendedKeyUsage=clientAuth\n' > "$T/client.ext"
    ossl x509 -req -in "$T/client.csr" -CA "$T/ca.pem" -CAkey "$T/ca.key" -CAcreateserial -days 30 \
      -extfile "$T/client.ext" -out "$T/client.pem"
    # The same server key, certified for one day in 2020 (openssl ca can backdate; x509 cannot).
    mkdir -p "$T/ca-db"
    : > "$T/ca-db/index.txt"
    echo 1000 > "$T/ca-db/serial"
    printf '[ca]\ndefault_ca = test\n[test]\ndatabase = %s\nserial = %s\nnew_certs_dir = %s\ndefault_md = sha256\npolicy = any\ncopy_extensions = none\n[any]\ncommonName = supplied\n' \
      "$T/ca-db/index.txt" "$T/ca-db/serial" "$T/ca-db" > "$T/ca-db/ca.cnf"
    ossl ca -batch -config "$T/ca-db/ca.cnf" -cert "$T/ca.pem" -keyfile "$T/ca.key" -in "$T/server.csr" \
      -startdate 20200101000000Z -enddate 20200102000000Z -extfile "$T/server.ext" -out "$T/expired.pem"
    chmod 644 "$T"/*.key
  fi
  server_cert=$T/server.pem
  if [[ ${RMQ_TLS_EXPIRED:-0} == 1 ]]; then server_cert=$T/expired.pem; fi
  cat >> "$DIR/rabbitmq.conf" <<CONF
listeners.ssl.1 = 127.0.0.1:$TLS_PORT
ssl_options.cacertfile = $T/ca.pem
ssl_options.certfile = $server_cert
ssl_options.keyfile = $T/server.key
ssl_options.verify = verify_peer
ssl_options.fail_if_no_peer_cert = false
ssl_cert_login_from = common_name
auth_mechanisms.1 = PLAIN
auth_mechanisms.2 = AMQPLAIN
auth_mechanisms.3 = EXTERNAL
CONF
  plugins="[rabbitmq_auth_mechanism_ssl]."
fi
if [[ -n ${RMQ_OAUTH2_KEY:-} ]]; then
  cat >> "$DIR/rabbitmq.conf" <<CONF
auth_backends.1 = rabbit_auth_backend_oauth2
auth_backends.2 = internal
CONF
  # The signing key as the plugin's key_config on 3.10 takes it: kty MAC, the key's text as is.
  cat > "$DIR/advanced.config" <<CONF
[{rabbitmq_auth_backend_oauth2, [
   {resource_server_id, <<"rabbitmq">>},
   {key_config, [{default_key, <<"warren-test">>},
                 {signing_keys, #{<<"warren-test">> => {map, #{<<"kty">> => <<"MAC">>, <<"alg">> => <<"HS256">>,
                                                              <<"value">> => <<"$RMQ_OAUTH2_KEY">>}}}}]}]}].
CONF
  if [[ $plugins == "[]." ]]; then plugins="[rabbitmq_auth_backend_oauth2]."
  else plugins="${plugins%]*}, rabbitmq_auth_backend_oauth2]."; fi
else
  rm -f "$DIR/advanced.config"
fi
echo "$plugins" > "$DIR/enabled_plugins"

export HOME=$DIR
export RABBITMQ_NODENAME=$NODE RABBITMQ_NODE_IP_ADDRESS=127.0.0.1 RABBITMQ_NODE_PORT=$PORT
export RABBITMQ_DIST_PORT=$(dist_port "$PORT")
export RABBITMQ_CONF_ENV_FILE=$DIR/rabbitmq-env.conf RABBITMQ_CONFIG_FILE=$DIR/rabbitmq.conf
export RABBITMQ_CONFIG_FILES=$DIR/conf.d RABBITMQ_ADVANCED_CONFIG_FILE=$DIR/advanced.config
export RABBITMQ_ENABLED_PLUGINS_FILE=$DIR/enabled_plugins
export RABBITMQ_MNESIA_BASE=$DIR/mnesia RABBITMQ_LOG_BASE=$DIR/log RABBITMQ_PID_FILE=$DIR/rabbit.pid
export ERL_EPMD_ADDRESS=127.0.0.1
export RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1} ${WARREN_BROKER_ERL_ARGS:-}"
# A descriptor per connection (bench/scale.sh holds 10,000): 65536, or the hard limit if lower.
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

# DIR/rabbitmqctl: the CLI for this node; node-ctl.sh answers the calls the suites make most
# without booting the CLI's own Erlang VM.
printf '#!/bin/sh\nexec %q %q %q "$@"\n' "$(dirname "$(realpath "$0")")/node-ctl.sh" "$DIR" "$NODE" > "$DIR/rabbitmqctl"
chmod +x "$DIR/rabbitmqctl"
# Whether the node's Erlang VM answers at all (a few ms; the CLI would take a second).
answers() { echo 'ok.' | HOME=$DIR erl_call -r -timeout 5 -sname "$NODE" -e >/dev/null 2>&1; }

started=$(date +%s%N)
setsid "$SBIN/rabbitmq-server" > "$DIR/log/console.out" 2>&1 < /dev/null &
wrapper=$!
deadline=$((SECONDS + 90))
until [[ -s $DIR/rabbit.pid ]] && answers && "$DIR/rabbitmqctl" -q await_startup -t 5 >/dev/null 2>&1; do
  if ! kill -0 "$wrapper" 2>/dev/null; then
    echo "broker-start: $NODE died while booting:" >&2
    tail -n 30 "$DIR/log/console.out" "$DIR/log/$NODE.log" >&2 2>/dev/null || true
    exit 1
  fi
  if ((SECONDS > deadline)); then
    echo "broker-start: $NODE not ready after 90 s" >&2
    tail -n 30 "$DIR/log/$NODE.log" >&2 2>/dev/null || true
    kill "$wrapper" 2>/dev/null || true
    exit 1
  fi
  sleep 0.5
done
echo "broker-start: $NODE ready on 127.0.0.1:$PORT (amqps: $TLS_PORT) in $((($(date +%s%N) - started) / 1000000)) ms" >&2
{
  echo "RMQ_NODE=$NODE"
  echo "RMQ_PORT=$PORT"
  echo "RMQ_TLS_PORT=$TLS_PORT"
  echo "RMQ_DIR=$DIR"
  echo "RMQ_PID=$(cat "$DIR/rabbit.pid")"
  echo "RMQ_CTL=$DIR/rabbitmqctl"
  if [[ $TLS_PORT != 0 ]]; then echo "RMQ_CA=$DIR/tls/ca.pem"; fi
} > "$DIR/broker.env"
cat "$DIR/broker.env"
