#!/usr/bin/env bash
# rabbitmqctl for a node started by broker-start.sh: DIR/rabbitmqctl runs this.
#   node-ctl.sh DIR NODE [rabbitmqctl arguments...]
# Each rabbitmqctl call boots an Erlang VM for the CLI: about 0.9 s of CPU on an idle machine,
# and the broker lanes' suites made 236 such calls in a run (most of them polling queue counts), beside
# the readiness polls of seven booting nodes. So the calls the suites make most are answered
# through erl_call (Erlang's own client, in erlang-base beside rabbitmq-server; a few ms),
# evaluating on the node what the CLI's command evaluates, with the CLI's output:
#   list_queues [name|messages|messages_ready|messages_unacknowledged|consumers ...] (vhost /;
#     the column names only above rows, as the CLI prints them)
#   eval EXPR, set_vm_memory_high_watermark FRACTION, await_startup [-t SECONDS], stop [PIDFILE]
# Anything else, any other option, and any of these when the node cannot be reached (so the
# error is the CLI's own), goes to the real rabbitmqctl. RMQ_TOOL=rabbitmq-plugins etc. picks
# another of the CLI's tools, always the real one.
set -uo pipefail
dir=$1 node=$2
shift 2
export HOME=$dir  # the node's Erlang cookie
out=
# The real CLI in this process's place (exec runs no EXIT trap: the scratch file goes first).
real() {
  [[ -n $out ]] && rm -f "$out"
  exec /usr/lib/rabbitmq/bin/"${RMQ_TOOL:-rabbitmqctl}" -n "$node" "$@"
}
[[ ${RMQ_TOOL:-rabbitmqctl} == rabbitmqctl ]] || real "$@"

args=("$@")
quiet=0
i=0
while [[ ${args[i]:-} == -q || ${args[i]:-} == --quiet ]]; do quiet=1; i=$((i + 1)); done
command=${args[i]:-}
rest=("${args[@]:i+1}")

out=$(mktemp)
trap 'rm -f "$out"' EXIT
# on_node CODE: evaluate CODE (Erlang expressions, no final dot) on the node; it writes what
# the command prints to the file named by the variable WarrenCtlOut, and ends in ok (or in
# failed, having written what went wrong). Returns 0 when CODE ended in ok, 2 when the node
# could not be reached (nothing ran), 1 otherwise.
on_node() {
  local said
  said=$(printf 'WarrenCtlOut = "%s",\n%s.\n' "$out" "$1" | erl_call -r -timeout 120 -sname "$node" -e 2>&1)
  case $said in
    "{ok, ok}") return 0 ;;
    "{ok, failed}") return 1 ;;
    *"failed to connect"*) return 2 ;;
    *) printf '%s\n' "$said" >"$out"; return 1 ;;
  esac
}
# fast CODE SAID ARGS...: run CODE on the node and print SAID (the CLI's informational lines,
# none with -q), then CODE's output; the real CLI when the node is unreachable, so that what
# it prints is the CLI's alone.
fast() {
  on_node "$1"
  local rc=$? said=$2
  shift 2
  if ((rc == 2)); then real "$@"; fi
  ((quiet)) || printf '%s' "$said"
  if ((rc == 1)); then
    echo "Error:"
    cat "$out"
    exit 69
  fi
  cat "$out"
}

case $command in
  list_queues)
    columns=("${rest[@]}")
    ((${#columns[@]})) || columns=(name messages)
    for c in "${columns[@]}"; do
      [[ $c =~ ^(name|messages|messages_ready|messages_unacknowledged|consumers)$ ]] || real "$@"
    done
    list=$(IFS=,; echo "${columns[*]}")
    fast "Cols = [$list],
      Text = fun({resource, _, queue, N}) -> N; (V) when is_integer(V) -> integer_to_binary(V);
                 (V) -> iolist_to_binary(io_lib:format(\"~p\", [V])) end,
      Row = fun(Vs) -> [lists:join(<<\"\\t\">>, Vs), <<\"\\n\">>] end,
      Rows = [Row([Text(proplists:get_value(C, Info)) || C <- Cols])
              || Info <- rabbit_amqqueue:info_all(<<\"/\">>, Cols)],
      Header = case Rows of [] -> []; _ -> Row([atom_to_binary(C) || C <- Cols]) end,
      ok = file:write_file(WarrenCtlOut, [Header | Rows])" \
      $'Timeout: 60.0 seconds ...\nListing queues for vhost / ...\n' "$@"
    ;;
  eval)
    ((${#rest[@]} == 1)) || real "$@"
    code=${rest[0]}
    code=${code%"${code##*[![:space:]]}"}  # trailing white space, then the final dot
    code=${code%.}
    fast "WarrenCtlResult = try begin $code end of WarrenCtlValue -> {value, WarrenCtlValue}
        catch WarrenCtlClass:WarrenCtlReason -> {raised, WarrenCtlClass, WarrenCtlReason} end,
      case WarrenCtlResult of
        {value, WarrenCtlV} -> ok = file:write_file(WarrenCtlOut, io_lib:format(\"~p~n\", [WarrenCtlV]));
        WarrenCtlRaised -> ok = file:write_file(WarrenCtlOut, io_lib:format(\"~p~n\", [WarrenCtlRaised])), failed
      end" "" "$@"
    ;;
  set_vm_memory_high_watermark)
    ((${#rest[@]} == 1)) && [[ ${rest[0]} =~ ^[0-9]*\.[0-9]+$ ]] || real "$@"
    fraction=${rest[0]}
    [[ $fraction == .* ]] && fraction=0$fraction
    fast "ok = vm_memory_monitor:set_vm_memory_high_watermark($fraction), ok = file:write_file(WarrenCtlOut, <<>>)" \
      "Setting memory threshold on $node to ${rest[0]} ..."$'\n' "$@"
    ;;
  await_startup)
    seconds=300
    if ((${#rest[@]} == 2)) && [[ ${rest[0]} == -t && ${rest[1]} =~ ^[0-9]+$ ]]; then seconds=${rest[1]}
    elif ((${#rest[@]})); then real "$@"; fi
    # A node not up yet is "unreachable": the real CLI then says so, as it would (and costs
    # what it costs: broker-start.sh polls with erl_call itself until the node answers).
    fast "ok = rabbit:await_startup(node(), false, $seconds * 1000), ok = file:write_file(WarrenCtlOut, <<>>)" "" "$@"
    ;;
  stop)
    ((${#rest[@]} <= 1)) || real "$@"
    pid= said="Stopping and halting node $node ..."$'\n'
    if ((${#rest[@]})); then
      pid=$(cat "${rest[0]}" 2>/dev/null) || real "$@"
      said="Stopping and halting node $node (will monitor pid file ${rest[0]}) ..."$'\n'
    fi
    # The node halts under the call: it answers first, then stops from a process of its own.
    fast "spawn(rabbit, stop_and_halt, []), ok = file:write_file(WarrenCtlOut, <<>>)" "$said" "$@"
    # With a pid file, return once that process has ended, as the CLI does (and says so, with
    # no line end).
    if [[ -n $pid ]]; then
      while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
      ((quiet)) || printf 'process %s (take from pid file %s) is no longer running' "$pid" "${rest[0]}"
    fi
    ;;
  *) real "$@" ;;
esac
