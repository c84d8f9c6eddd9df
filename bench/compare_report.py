"""Turns bench/compare.sh's result lines into docs/benchmarks.md, docs/benchmarks.png and
docs/benchmarks-scale.png.

Medians per client and workload of msgs/s, CPU microseconds per message (user + sys, from
getrusage) and peak RSS, and the ratio of CPU per message to rabbitmq-c, to the best peer (the
cheapest other client) and to the wire floor (no client); syscalls per message;
latency at a sustained rate in the default and the throughput mode; latency by message size
(a paced stream, RPC round trips, a prefetch-1 consumer and a get loop) at default and with
batching off; the scale runs.
"""
import json
import os
import platform
import statistics
import subprocess
import sys

(results_path, syscalls_path, latency_path, size_path, scale_path, out_dir, rounds, count, pika_count,
 rabbitmq_version, otp_release, load_average) = sys.argv[1:13]


def read_lines(path):
    return [json.loads(line) for line in open(path) if line.strip()]


runs = read_lines(results_path)
syscall_runs = read_lines(syscalls_path)
latency_runs = read_lines(latency_path)
size_runs = read_lines(size_path)
scale_runs = read_lines(scale_path)
clients = ["warren-uv", "warren-asio", "rabbitmq-c", "pika", "amqp091-go", "java", "java-warm", "amqplib",
           "wire-floor", "warren-asio-uring", "warren-asio-receive", "warren-uv-batch", "warren-asio-batch",
           "warren-uv-unbatched", "warren-asio-unbatched"]
# The clients warren is measured against: the best of them in a workload is "the best peer".
peers = ["rabbitmq-c", "pika", "amqp091-go", "java", "java-warm", "amqplib"]
# How a row is named: the Java client's cold run is reported as its whole process's CPU (JVM
# start-up included), its warm run as the measured phase after as many messages unmeasured.
shown = {"java": "java, whole process", "java-warm": "java, warm"}
charted = ["warren-uv", "warren-asio", "rabbitmq-c", "warren-uv-batch", "warren-asio-batch"]
workloads = {
    "W1": "publish 64 B, no confirms",
    "W2": "publish 64 B, confirms, 1,000 in flight (topped up by 250)",
    "W3": "consume 64 B (lazy queue), prefetch 500, multiple ack / 100",
}


def cell(client, workload):
    rs = [r["result"] for r in runs if r["client"] == client and r["workload"] == workload]
    if not rs:
        return None
    rate_key = "receive_rate" if workload == "W3" else "send_rate"
    cpu_key = "process_cpu_us_per_msg" if client == "java" else "cpu_us_per_msg"
    return {
        "rate": statistics.median(r[rate_key] for r in rs),
        "cpu": statistics.median(r[cpu_key] for r in rs),
        "rss": statistics.median(r["peak_rss_kb"] for r in rs) / 1024,
        "allocs": statistics.median(r["allocs_per_msg"] for r in rs) if all("allocs_per_msg" in r for r in rs) else None,
        "n": len(rs),
    }


def cmd(*args):
    try:
        return subprocess.run(args, capture_output=True, text=True, check=False).stdout.strip()
    except OSError:
        return "?"


cpu_model = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
table = {(c, w): cell(c, w) for c in clients for w in workloads}
lines = [
    "# Benchmarks: warren against amqp091-go, the Java client, amqplib, rabbitmq-c and pika, and the wire floor",
    "",
    "Written by `bench/compare.sh` (do not edit by hand). Each cell is the median of "
    f"{rounds} rounds of {int(count):,} messages (pika, amqp091-go, java and amqplib: "
    f"{int(pika_count):,}, they are that much slower); the clients take turns on one broker.",
    "",
    f"- machine: {os.cpu_count()} cores, {cpu_model}, Linux {platform.release()}",
    f"- broker: RabbitMQ {rabbitmq_version} on Erlang/OTP {otp_release}, on the same host (loopback)",
    f"- clients: warren {cmd('git', 'rev-parse', '--short', 'HEAD')} (release build, GCC), "
    f"rabbitmq-c {cmd('dpkg-query', '-W', '-f', '${Version}', 'librabbitmq4')} (Debian's librabbitmq4), "
    f"pika {cmd('dpkg-query', '-W', '-f', '${Version}', 'python3-pika')} (Debian's python3-pika, "
    "BlockingConnection; SelectConnection for W2), "
    f"amqp091-go {cmd('dpkg-query', '-W', '-f', '${Version}', 'golang-github-rabbitmq-amqp091-go-dev')} "
    f"(Debian's, Go {cmd('go', 'env', 'GOVERSION')}), the Java client "
    f"{cmd('dpkg-query', '-W', '-f', '${Version}', 'librabbitmq-client-java')} (Debian's, on OpenJDK "
    f"{cmd('dpkg-query', '-W', '-f', '${Version}', 'openjdk-17-jdk-headless')}), amqplib "
    f"{json.load(open('bench/peers/node/package.json'))['dependencies']['amqplib']} (npm, on node "
    f"{cmd('node', '--version')}); each written as a performance-minded user of it would (bench/peers/)",
    "- the peers: amqp091-go publishes from one goroutine with `NotifyPublish` confirms; the Java "
    "client with `confirmSelect` and an asynchronous `ConfirmListener`; amqplib on a `ConfirmChannel` "
    "with callbacks; all consume with prefetch 500 and a multiple ack every 100. Debian's amqp091-go "
    "(1.5.0) writes every frame with its own write (fixed upstream in 1.6.0) and its Java client is "
    "5.0.0: newer releases of both may do better; amqplib is current.",
    "- java, whole process: the Java client's CPU from JVM start to exit over the messages moved; "
    "java, warm: its measured phase after as many messages again unmeasured (the JIT warm).",
    "- wire-floor (bench/wire_floor.cpp) is no client at all: frames encoded once and written in "
    "large writes, confirms and deliveries found by walking frame boundaries, a multiple ack every "
    "100. Its CPU per message is what the kernel and the broker's pace cost any client here.",
    "- warren-asio-uring (when measured) is the Asio driver built with `-Dasio_io_uring=true`: "
    "Asio on io_uring instead of epoll, the same program otherwise.",
    "- warren-uv-batch and warren-asio-batch are the same consumer in throughput mode: "
    "`ClientOptions::read_batching = {.min_bytes = 32768, .max_wait = 2 ms}` "
    "(`warren perf --read-min-bytes 32768 --read-max-wait 2000`).",
    "- warren-uv and warren-asio run at default settings, where read batching engages only past "
    "bursts (`client::adaptive_read_batching`: after a read of 4 KiB or more that completed two "
    "deliveries or more, mark 32 KiB, max_wait 1 ms; a read of less than 2 KiB or of one delivery "
    "ends it) and while 256 or more publishes await their confirms "
    "(`ReadBatching::owed_confirms`: W2's 1,000 in flight reads its confirms about once a millisecond). "
    "warren-uv-unbatched and warren-asio-unbatched are the same programs with batching off "
    "(`--read-min-bytes 0 --read-owed-confirms 0`: every readable byte read at once, the "
    "default before issue 25).",
    "- CPU is the client process's user + system time (getrusage) over the measured phase, "
    "divided by the messages moved.",
    f"- load: the 1-minute load average was {load_average} as the runs ended (2 cores; above about 1, "
    "other work shared the machine and every client's CPU per message is inflated alike).",
    "",
    "| workload | client | msgs/s | CPU µs/msg | peak RSS (MiB) | CPU vs rabbitmq-c | vs best peer | vs wire floor |",
    "|---|---|---:|---:|---:|---:|---:|---:|",
]


def ratio(v, base):
    return f"{v['cpu'] / base['cpu']:.2f}" if base and base["cpu"] > 0 else "-"


def best_peer(w):
    measured = [(table[(c, w)]["cpu"], c) for c in peers if table[(c, w)]]
    return min(measured) if measured else None


for w, what in workloads.items():
    base, floor = table[("rabbitmq-c", w)], table[("wire-floor", w)]
    best = best_peer(w)
    best_cell = table[(best[1], w)] if best else None
    for c in clients:
        v = table[(c, w)]
        if v is None:
            continue
        lines.append(f"| {w}: {what} | {shown.get(c, c)} | {v['rate']:,.0f} | {v['cpu']:.2f} | {v['rss']:.1f} | "
                     f"{ratio(v, base)} | {ratio(v, best_cell)} | {ratio(v, floor)} |")
lines.append("")
for w in workloads:
    best = best_peer(w)
    if best:
        lines.append(f"- {w}: the best peer is {shown.get(best[1], best[1])} ({best[0]:.2f} µs/msg).")
for w, how in (("W2", "a deep confirm window's confirms read in batches"), ("W3", "batching past bursts")):
    for d in ("uv", "asio"):
        on, off = table[(f"warren-{d}", w)], table[(f"warren-{d}-unbatched", w)]
        if on and off and off["cpu"] > 0:
            lines.append(f"- {w}: warren-{d} at default settings ({how}) costs {on['cpu'] / off['cpu']:.2f}x "
                         f"the CPU per message of warren-{d}-unbatched (batching off).")
push, stream = table[("warren-asio", "W3")], table[("warren-asio-receive", "W3")]
if push and stream and push["cpu"] > 0:
    lines += [
        "",
        f"W3 through `co_await consumer.receive(asio::use_awaitable)` (warren-asio-receive, an owned "
        f"Message per delivery) costs {stream['cpu'] / push['cpu']:.2f}x the CPU per message of the "
        f"push callback (warren-asio) in the same run, and makes "
        f"{stream['allocs'] if stream['allocs'] is not None else float('nan'):.4f} heap allocations per "
        "message in steady state (counted between the 10% and 90% marks of the run).",
    ]

# What observability costs: warren-uv with metrics on, and (with --baseline) another build of
# warren-uv, against warren-uv in the same run.
cost_clients = ["warren-uv-metrics", "warren-uv-baseline"]
costs = {(c, w): cell(c, w) for c in cost_clients for w in workloads}
if any(costs.values()):
    lines += [
        "",
        "## What observability costs",
        "",
        "warren-uv with the client's metrics on (warren-uv-metrics: `--metrics-listen`, every "
        "connection counting into a `Metrics`, not scraped during the run) and, where measured, "
        "warren-uv-baseline: the build `bench/compare.sh --baseline DIR` named (warren before a "
        "change), each against warren-uv in the same rounds. No observer is set in any of them.",
        "",
        "| workload | client | CPU µs/msg | vs warren-uv |",
        "|---|---|---:|---:|",
    ]
    for w in workloads:
        base = table[("warren-uv", w)]
        if base:
            lines.append(f"| {w} | warren-uv | {base['cpu']:.2f} | 1.00 |")
        for c in cost_clients:
            v = costs[(c, w)]
            if v is None:
                continue
            ratio = f"{v['cpu'] / base['cpu']:.2f}" if base and base["cpu"] > 0 else "-"
            lines.append(f"| {w} | {c} | {v['cpu']:.2f} | {ratio} |")

# The baseline in pairs: with --baseline, compare.sh runs warren-uv (as warren-uv-paired) and
# the baseline build next to each other, each pair the other way round; the k-th run of each
# in a workload make the k-th pair. The ratio of each pair, then their median: what a change
# costs, with the host's drift between rounds taken out.
paired = {}
for w in workloads:
    mine = [r["result"]["cpu_us_per_msg"] for r in runs if r["client"] == "warren-uv-paired" and r["workload"] == w]
    base = [r["result"]["cpu_us_per_msg"] for r in runs if r["client"] == "warren-uv-baseline" and r["workload"] == w]
    ratios = [m / b for m, b in zip(mine, base) if b > 0]
    if ratios:
        paired[w] = (statistics.median(mine), statistics.median(base), statistics.median(ratios), len(ratios))
if paired:
    lines += [
        "",
        "## Against the baseline, in pairs",
        "",
        "warren-uv (this build) and warren-uv-baseline (the build `--baseline DIR` named) run in "
        "adjacent pairs, each pair the other way round; the ratio is the median of the pairs' "
        "ratios of CPU per message (this build over the baseline: below 1.00 is cheaper).",
        "",
        "| workload | pairs | this build µs/msg | baseline µs/msg | this build / baseline |",
        "|---|---:|---:|---:|---:|",
    ]
    for w, (m, b, ratio, n) in paired.items():
        lines.append(f"| {w} | {n} | {m:.2f} | {b:.2f} | {ratio:.2f} |")

# Syscalls per message, one strace -c run per client and workload.
names = ["epoll_wait", "poll", "io_uring_enter", "recvfrom", "read", "sendmsg", "sendto", "write", "epoll_ctl",
         "setsockopt", "timerfd_settime"]
lines += [
    "",
    "## Syscalls per message",
    "",
    "One run of a quarter of the messages per client under `strace -f -c` (start-up and "
    "connection set-up included); calls per message, and what each client spends them on. "
    "`recvfrom` counts include reads that found nothing (EAGAIN).",
    "",
    "| workload | client | all | " + " | ".join(names) + " |",
    "|---|---|---:|" + "---:|" * len(names),
]
for w in workloads:
    for r in [r for r in syscall_runs if r["workload"] == w]:
        n = r["messages"]
        calls = r["syscalls"]
        every = sum(calls.values()) / n
        row = " | ".join(f"{calls.get(k, 0) / n:.3f}" if calls.get(k) else "" for k in names)
        lines.append(f"| {w} | {r['client']} | {every:.3f} | {row} |")

# Latency at a sustained rate.
if latency_runs:
    lines += [
        "",
        "## Latency at a sustained rate (L)",
        "",
        "One producer and one consumer in one process, 64 B at 10,000 msg/s (`warren perf -x 1 -y 1 "
        "-r 10000`; the peers' programs with `--workload latency --rate 10000`), prefetch 500, a "
        "multiple ack every 100: the broker keeps up, so the latency (publish to delivery callback) "
        "is the clients'. CPU covers both the producer and the consumer. The -unbatched rows are "
        "the same run with read batching off: what the default's batching past bursts costs here.",
        "",
        "| client | received msgs/s | latency p50 (µs) | latency p99 (µs) | CPU µs/msg |",
        "|---|---:|---:|---:|---:|",
    ]
    for r in latency_runs:
        v = r["result"]
        lines.append(f"| {shown.get(r['client'], r['client'])} | {v['receive_rate']:,.0f} | {v['latency_us']['p50']:,.0f} | "
                     f"{v['latency_us']['p99']:,.0f} | {v['cpu_us_per_msg']:.2f} |")
    by_client = {r["client"]: r["result"] for r in latency_runs}
    peer_p99 = [(by_client[c]["latency_us"]["p99"], c) for c in peers if c in by_client]
    if peer_p99 and "warren-uv" in by_client:
        p99, c = min(peer_p99)
        lines += ["", f"At default settings warren-uv's p99 is {by_client['warren-uv']['latency_us']['p99']:,.0f} µs "
                      f"and warren-asio's {by_client.get('warren-asio', {}).get('latency_us', {}).get('p99', float('nan')):,.0f} µs; "
                      f"the best peer's is {shown.get(c, c)}'s, {p99:,.0f} µs. The peers run producer and consumer "
                      "on two channels of one connection, warren perf on two connections."]
    for d in ("uv", "asio"):
        on, off = by_client.get(f"warren-{d}"), by_client.get(f"warren-{d}-unbatched")
        if on and off:
            lines.append(f"- warren-{d}: p50/p99 {on['latency_us']['p50']:,.0f}/{on['latency_us']['p99']:,.0f} µs "
                         f"at default settings, {off['latency_us']['p50']:,.0f}/{off['latency_us']['p99']:,.0f} µs "
                         "with read batching off.")

# Latency by message size.
if size_runs:
    def median_result(results):  # each field's median over the rounds (latency_us's too)
        out = {}
        for k in ("rate", "receive_rate"):
            vals = [r[k] for r in results if k in r]
            if vals:
                out[k] = statistics.median(vals)
        out["latency_us"] = {q: statistics.median([r["latency_us"][q] for r in results]) for q in ("p50", "p99")}
        return out

    def by(kind):
        grouped = {}
        for r in size_runs:
            if r["kind"] == kind:
                grouped.setdefault((r["size"], r["client"]), []).append(r["result"])
        return {k: median_result(v) for k, v in grouped.items()}

    def within(on, off):  # the goal: the default's p50 within 10% (or 50 µs) of batching off
        return on <= max(off * 1.10, off + 50)

    stream, rpc = by("stream"), by("rpc")
    rpc_calls = max([r["result"].get("count", 0) for r in size_runs if r["kind"] == "rpc" and r["client"] == "warren-uv"] or [0])
    sizes = sorted({s for s, _ in stream} | {s for s, _ in rpc})
    lines += [
        "",
        "## Latency by message size",
        "",
        "Read batching may never hold a message that nothing says is followed by more (issue 37). "
        f"Each cell is the median of {max(len([r for r in size_runs if r['kind'] == 'rpc' and r['client'] == 'warren-uv' and r['size'] == size_runs[0]['size']]), 1)} "
        "rounds (the clients in turn, warren's drivers in the other order every other round). "
        "A paced stream: 200 msg/s of each size to a consumer with prefetch 500, from a producer "
        "in the same process; the latency is publish to delivery callback. warren's default and "
        "off consumers run at the same time in one process (bench/read_latency.cpp `--mode stream "
        "--batching both`: a connection and a queue each, their messages half a period apart), so "
        "both see the same machine, each at 100 msg/s for twice as long, so the pair moves the "
        "bytes a second of a peer's run and each as many messages; the peers' programs with "
        "`--workload latency --rate 200 --size SIZE`. "
        "\"alone\" is warren's default measured as a peer's run is, one consumer at 200 msg/s "
        "for as long (`--batching default`): its p99 is the one set beside the peers'. "
        "The stream's p99 is largely the broker's: about every 510 ms the broker holds one "
        "delivery 0.5-1.5 ms longer (the same period in warren on both drivers and in pika, "
        "none without the broker), about 1% of the messages at 200 msg/s, so each p99 lies at "
        "the edge of those holds and moves by milliseconds from run to run. "
        f"RPC: {rpc_calls:,} calls one after another over direct reply-to to `warren rpc serve` (the reply "
        "as large as the request; bench/read_latency.cpp, the peers' programs with `--workload rpc`), "
        "the latency a call's round trip; warren's default and off connections take turns in one "
        "process, 100 calls at a time, so both see the same placement of threads on the two cores. "
        "\"default\" is warren at default settings, \"off\" with read batching off "
        "(`--read-min-bytes 0`); the ratio is default / off.",
        "",
        "| size (B) | client | stream p50 (µs) | stream p99 (µs) | p50 default/off | RPC p50 (µs) | RPC p99 (µs) | RPC p50 default/off |",
        "|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    verdicts = []
    for size in sizes:
        for client in ("warren-uv", "warren-uv-unbatched", "warren-uv-alone", "warren-asio", "warren-asio-unbatched",
                       "warren-asio-alone", "amqp091-go", "java-warm", "amqplib"):
            s, r = stream.get((size, client)), rpc.get((size, client))
            if not s and not r:
                continue
            name = (client.replace("-unbatched", " (off)").replace("-alone", " (alone)") if client.startswith("warren")
                    else shown.get(client, client))
            cells = [f"{s['latency_us']['p50']:,.0f}" if s else "", f"{s['latency_us']['p99']:,.0f}" if s else "", "",
                     f"{r['latency_us']['p50']:,.0f}" if r else "", f"{r['latency_us']['p99']:,.0f}" if r else "", ""]
            if client in ("warren-uv", "warren-asio"):
                s_off, r_off = stream.get((size, client + "-unbatched")), rpc.get((size, client + "-unbatched"))
                if s and s_off:
                    cells[2] = f"{s['latency_us']['p50'] / s_off['latency_us']['p50']:.2f}"
                    verdicts.append(("stream", client, size, within(s["latency_us"]["p50"], s_off["latency_us"]["p50"])))
                if r and r_off:
                    cells[5] = f"{r['latency_us']['p50'] / r_off['latency_us']['p50']:.2f}"
                    verdicts.append(("rpc", client, size, within(r["latency_us"]["p50"], r_off["latency_us"]["p50"])))
            lines.append(f"| {size:,} | {name} | " + " | ".join(cells) + " |")
    if verdicts:
        missed = [f"{k} {c} {s:,} B" for k, c, s, ok in verdicts if not ok]
        lines += ["", "- The default's p50 within 10% (or 50 µs) of batching off, at every size, both drivers: " +
                  ("yes." if not missed else "no: " + ", ".join(missed) + ".")]
        for kind, by_size in (("stream", stream), ("RPC", rpc)):
            for client in ("warren-uv", "warren-asio"):
                worse, compared, alone = [], 0, 0
                for size in sizes:
                    # The stream's p99 is warren's run alone where there is one: measured as the peers' are.
                    mine = by_size.get((size, client + "-alone")) or by_size.get((size, client))
                    alone += (size, client + "-alone") in by_size
                    theirs = [by_size[(size, p)]["latency_us"]["p99"] for p in ("amqp091-go", "java-warm", "amqplib") if (size, p) in by_size]
                    if mine and theirs:
                        compared += 1
                        if mine["latency_us"]["p99"] > min(theirs):
                            worse.append(f"{size:,} B ({mine['latency_us']['p99']:,.0f} against {min(theirs):,.0f} µs)")
                if compared:
                    how = (" (run alone)" if alone == compared else f" (run alone at {alone} of {compared} sizes)") if alone else ""
                    lines.append(f"- {client}'s {kind} p99 at default{how} against the best peer's at each size: " +
                                 ("never worse." if not worse else "worse at " + ", ".join(worse) + "."))
    one = [r for r in size_runs if r["kind"] in ("prefetch1", "get")]
    rates = {}
    for kind in ("prefetch1", "get"):
        rates.update({(kind, client): v for (_, client), v in by(kind).items()})
    if one:
        lines += [
            "",
            "One 8 KiB message a read: 2,000 through a consumer with a prefetch of 1 (the next is sent only "
            "after the ack) and 2,000 through `basic.get` one after another (bench/read_latency.cpp), "
            "the rate at default and with batching off: the two connections take turns in one process, "
            "100 messages at a time (the rate is one over the mean time between messages within a turn).",
            "",
            "| loop | client | msgs/s | p50 between messages (µs) | p99 (µs) | rate default/off |",
            "|---|---|---:|---:|---:|---:|",
        ]
        for kind in ("prefetch1", "get"):
            for client in ("warren-uv", "warren-uv-unbatched", "warren-asio", "warren-asio-unbatched"):
                v = rates.get((kind, client))
                if not v:
                    continue
                off = rates.get((kind, client + "-unbatched"))
                ratio = f"{v['rate'] / off['rate']:.2f}" if off else ""
                name = client.replace("-unbatched", " (off)")
                label = "prefetch 1" if kind == "prefetch1" else "basic.get"
                lines.append(f"| {label} | {name} | {v['rate']:,.0f} | {v['latency_us']['p50']:,.0f} | "
                             f"{v['latency_us']['p99']:,.0f} | {ratio} |")
        slower = [f"{'prefetch 1' if kind == 'prefetch1' else 'basic.get'} {client} "
                  f"({rates[(kind, client)]['rate'] / rates[(kind, client + '-unbatched')]['rate']:.2f})"
                  for kind in ("prefetch1", "get") for client in ("warren-uv", "warren-asio")
                  if (kind, client) in rates and (kind, client + "-unbatched") in rates
                  and rates[(kind, client)]["rate"] < 0.9 * rates[(kind, client + "-unbatched")]["rate"]]
        lines += ["", "- Each loop's rate at default within 10% of batching off, both drivers: " +
                  ("yes." if not slower else "no: " + ", ".join(slower) + ".")]

# Scale.
if scale_runs:
    heartbeat = scale_runs[0].get("heartbeat_s", 0)
    idle_seconds = scale_runs[0]["result"].get("idle", {}).get("seconds", 0)
    lines += [
        "",
        "## Scale: connections and channels",
        "",
        "A consumer process alone (bench/scale.sh): every connection set up (one channel and one "
        f"consumer each, or one connection with many channels), then idle for {idle_seconds:.0f} s with "
        f"a {heartbeat} s heartbeat, then fed by a producer process at 10,000 msg/s in total, prefetch "
        "100, a multiple ack every 10. Idle: the process's RSS at the idle phase's end, the "
        "connections' share of it (above the process before it dialled them), its CPU per second and "
        "its wake-ups per second (voluntary context switches: each wait of the loop that slept). "
        "Fed: CPU per message and peak RSS." +
        (" A driver marked +tls: the same consumers over the broker's TLS listener (the chain and host "
         "name verified, one OpenSSL context shared by the process's connections); the producer stays plain."
         if any(r["driver"].endswith("+tls") for r in scale_runs) else ""),
        "",
        "| driver | connections × channels | idle RSS (MiB) | idle KiB per connection | idle CPU µs/s | "
        "idle wake-ups/s | received msgs/s | CPU µs/msg | peak RSS (MiB) |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in scale_runs:
        v = r["result"]
        idle = v.get("idle", {})
        share = (idle["rss_kb"] - idle["rss_before_kb"]) / max(1, r["connections"]) if idle else 0
        lines.append(f"| {r['driver']} | {r['connections']} × {r['channels']} | "
                     f"{idle.get('rss_kb', 0) / 1024:.1f} | {share:.1f} | {idle.get('cpu_us_per_s', 0):,.0f} | "
                     f"{idle.get('wakeups_per_s', 0):,.1f} | {v['receive_rate']:,.0f} | "
                     f"{v['cpu_us_per_msg']:.2f} | {v['peak_rss_kb'] / 1024:.1f} |")
    lines.append("")
    for driver in sorted({r["driver"] for r in scale_runs}):
        rss = {(r["connections"], r["channels"]): r["result"].get("idle", {}).get("rss_kb")
               for r in scale_runs if r["driver"] == driver}
        most_connections = max((c for c, h in rss if h == 1), default=1)
        most_channels = max((h for c, h in rss if c == 1), default=1)
        said = []
        if rss.get((1, 1)) and most_connections > 1 and rss.get((most_connections, 1)):
            per = (rss[(most_connections, 1)] - rss[(1, 1)]) / (most_connections - 1)
            if driver.endswith("+tls"):
                # No goal of its own: what OpenSSL adds, against the plain driver over the same range.
                plain = {(r["connections"], r["channels"]): r["result"].get("idle", {}).get("rss_kb")
                         for r in scale_runs if r["driver"] == driver[:-len("+tls")]}
                versus = ""
                if plain.get((1, 1)) and plain.get((most_connections, 1)):
                    plain_per = (plain[(most_connections, 1)] - plain[(1, 1)]) / (most_connections - 1)
                    versus = f"; plain over the same range {plain_per:.1f}, so TLS adds {per - plain_per:.1f}"
                said.append(f"{per:.1f} KiB of idle RSS per extra connection (1 to {most_connections:,} connections{versus})")
            else:
                said.append(f"{per:.1f} KiB of idle RSS per extra connection (1 to {most_connections:,} connections; "
                            "goal 16 KiB at most)")
        if rss.get((1, 1)) and most_channels > 1 and rss.get((1, most_channels)):
            said.append(f"{(rss[(1, most_channels)] - rss[(1, 1)]) / (most_channels - 1):.2f} KiB per extra channel "
                        f"(1 to {most_channels:,} channels; goal 1 KiB at most)")
        if said:
            lines.append(f"- {driver}: " + ", ".join(said) + ".")
    lines += ["", "![Scale](benchmarks-scale.png)"]

lines += [
    "",
    "![CPU per message](benchmarks.png)",
    "",
    "## Reading the figures",
    "",
    "- On this kind of machine (a 2-core VM, broker alongside) a client's CPU per message is "
    "mostly the kernel's cost of waking it and of the TCP stack: `perf record` on W3 puts about "
    "60% of a default-mode consumer's samples in the kernel (`recv`, the TCP acks it sends, "
    "`epoll_wait` and the switch back into the process). A workload that wakes the client often "
    "(W2 for each batch of confirms, W3 for each burst of deliveries) costs microseconds per "
    "message whichever client runs; W1, which never waits for the broker, shows the client's "
    "own cost.",
    "- The wire floor does nothing a client could skip: where a client is close to it (W2, W3) "
    "what is left is the kernel's cost per wake-up and the broker's pace, and fewer wake-ups "
    "(throughput mode; a deep confirm window's batched reads in W2) is the only way below it. In W1 the floor writes frames encoded once, "
    "so its ratio is what encoding each message costs a client: the user-space share of W1.",
    "- The peers' figures are their own processes' CPU: the Go runtime's and the JVM's threads "
    "(garbage collection, the JIT on the cold run) count, as they do in a service running them.",
    "- Throughput mode cuts the wake-ups: the kernel holds the bytes until the mark "
    "(SO_RCVLOWAT) and the client reads them in one go, at the price of at most max_wait of "
    "latency while messages keep coming (the L table).",
    "- W3 reads from a lazy queue. A default classic queue holding 200,000 messages was read "
    "at about 70,000 or about 19,000 msg/s from one run to the next, for every client alike, "
    "so its medians said more about the broker than about the clients.",
    "- W1 ends when a passive queue.declare (polled every 5 ms by both programs) shows the "
    "broker holds every message, not when the last byte was written.",
    "- Peak RSS is the whole process's (getrusage `ru_maxrss`), startup included; pika's "
    "includes the Python interpreter.",
    "",
]
open(os.path.join(out_dir, "benchmarks.md"), "w").write("\n".join(lines))

data_path = os.path.join(out_dir, "benchmarks.dat")
with open(data_path, "w") as f:
    f.write("workload " + " ".join(charted) + "\n")
    for w in workloads:
        f.write(w + " " + " ".join(f"{(table[(c, w)] or {'cpu': 0})['cpu']:.4f}" for c in charted) + "\n")
script = f"""
set terminal pngcairo size 800,450 font 'sans,10'
set output '{os.path.join(out_dir, "benchmarks.png")}'
set title 'Client CPU per message (lower is better), median of {rounds} rounds'
set ylabel 'CPU microseconds per message'
set style data histogram
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set key top left
set grid ytics
set yrange [0:*]
plot '{data_path}' using 2:xtic(1) title col, '' using 3 title col, '' using 4 title col, '' using 5 title col, '' using 6 title col
"""
subprocess.run(["gnuplot"], input=script, text=True, check=True)
os.remove(data_path)

if scale_runs:
    shapes = list(dict.fromkeys((r["connections"], r["channels"]) for r in scale_runs))
    drivers = sorted({r["driver"] for r in scale_runs})
    with open(data_path, "w") as f:
        f.write("shape " + " ".join(drivers) + "\n")
        for c, h in shapes:
            row = [next((r["result"]["cpu_us_per_msg"] for r in scale_runs
                         if r["driver"] == d and r["connections"] == c and r["channels"] == h), None) for d in drivers]
            # A shape a driver did not run (the TLS rows run only some) is no bar, not a zero.
            f.write(f"{c}x{h} " + " ".join("NaN" if v is None else f"{v:.4f}" for v in row) + "\n")
    plots = ", ".join(["'{0}' using 2:xtic(1) title col".format(data_path)] +
                      [f"'' using {i + 2} title col" for i in range(1, len(drivers))])
    subprocess.run(["gnuplot"], input=f"""
set terminal pngcairo size 800,400 font 'sans,10'
set output '{os.path.join(out_dir, "benchmarks-scale.png")}'
set title 'Consumer CPU per message by connections x channels, 10,000 msg/s in total'
set ylabel 'CPU microseconds per message'
set style data histogram
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set key top left
set grid ytics
set yrange [0:*]
plot {plots}
""", text=True, check=True)
    os.remove(data_path)
print("\n".join(lines))
