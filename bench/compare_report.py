"""Turns bench/compare.sh's result lines into docs/benchmarks.md and docs/benchmarks.png.

Medians per client and workload of msgs/s, CPU microseconds per message (user + sys, from
getrusage) and peak RSS, and the warren/rabbitmq-c ratio of CPU per message.
"""
import json
import os
import platform
import statistics
import subprocess
import sys

results_path, out_dir, rounds, count, rabbitmq_version, otp_release, load_average = sys.argv[1:8]
runs = [json.loads(line) for line in open(results_path) if line.strip()]
clients = ["warren-uv", "warren-asio", "rabbitmq-c", "warren-asio-receive"]
workloads = {
    "W1": "publish 64 B, no confirms",
    "W2": "publish 64 B, confirms, 1,000 in flight",
    "W3": "consume 64 B (lazy queue), prefetch 500, multiple ack / 100",
}


def cell(client, workload):
    rs = [r["result"] for r in runs if r["client"] == client and r["workload"] == workload]
    if not rs:
        return None
    rate_key = "receive_rate" if workload == "W3" else "send_rate"
    return {
        "rate": statistics.median(r[rate_key] for r in rs),
        "cpu": statistics.median(r["cpu_us_per_msg"] for r in rs),
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
    "# Benchmarks: warren against rabbitmq-c",
    "",
    "Written by `bench/compare.sh` (do not edit by hand). Each cell is the median of "
    f"{rounds} rounds of {int(count):,} messages; the clients take turns on one broker.",
    "",
    f"- machine: {os.cpu_count()} cores, {cpu_model}, Linux {platform.release()}",
    f"- broker: RabbitMQ {rabbitmq_version} on Erlang/OTP {otp_release}, on the same host (loopback)",
    f"- clients: warren {cmd('git', 'rev-parse', '--short', 'HEAD')} (release build, GCC), "
    f"rabbitmq-c {cmd('dpkg-query', '-W', '-f', '${Version}', 'librabbitmq4')} (Debian's librabbitmq4)",
    "- CPU is the client process's user + system time (getrusage) over the measured phase, "
    "divided by the messages moved.",
    f"- load: the 1-minute load average was {load_average} as the runs ended (2 cores; above about 1, "
    "other work shared the machine and every client's CPU per message is inflated alike).",
    "",
    "| workload | client | msgs/s | CPU µs/msg | peak RSS (MiB) | CPU vs rabbitmq-c |",
    "|---|---|---:|---:|---:|---:|",
]
for w, what in workloads.items():
    base = table[("rabbitmq-c", w)]
    for c in clients:
        v = table[(c, w)]
        if v is None:
            continue
        ratio = f"{v['cpu'] / base['cpu']:.2f}" if base and base["cpu"] > 0 else "-"
        lines.append(f"| {w}: {what} | {c} | {v['rate']:,.0f} | {v['cpu']:.2f} | {v['rss']:.1f} | {ratio} |")
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
lines += [
    "",
    "![CPU per message](benchmarks.png)",
    "",
    "## Reading the figures",
    "",
    "- On this kind of machine (a 2-core VM, broker alongside) a client's CPU per message is "
    "mostly the kernel's cost of waking it: `perf record` on W3 puts over half of the samples "
    "in the scheduler's switch back into the process after `epoll_wait` or `recv` slept. A "
    "workload that wakes the client often (W2 for each batch of confirms, W3 for each burst of "
    "deliveries) costs microseconds per message whichever client runs; W1, which never waits "
    "for the broker, shows the client's own cost.",
    "- W3 reads from a lazy queue. A default classic queue holding 200,000 messages was read "
    "at about 70,000 or about 19,000 msg/s from one run to the next, for every client alike, "
    "so its medians said more about the broker than about the clients.",
    "- W1 ends when a passive queue.declare (polled every 5 ms by both programs) shows the "
    "broker holds every message, not when the last byte was written.",
    "- Peak RSS is the whole process's (getrusage `ru_maxrss`), startup included.",
    "",
]
open(os.path.join(out_dir, "benchmarks.md"), "w").write("\n".join(lines))

data_path = os.path.join(out_dir, "benchmarks.dat")
with open(data_path, "w") as f:
    f.write("workload " + " ".join(clients) + "\n")
    for w in workloads:
        f.write(w + " " + " ".join(f"{(table[(c, w)] or {'cpu': 0})['cpu']:.4f}" for c in clients) + "\n")
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
plot '{data_path}' using 2:xtic(1) title col, '' using 3 title col, '' using 4 title col, '' using 5 title col
"""
subprocess.run(["gnuplot"], input=script, text=True, check=True)
os.remove(data_path)
print("\n".join(lines))
