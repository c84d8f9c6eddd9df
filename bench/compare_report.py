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

results_path, out_dir, rounds, count, rabbitmq_version, otp_release = sys.argv[1:7]
runs = [json.loads(line) for line in open(results_path) if line.strip()]
clients = ["warren-uv", "warren-asio", "rabbitmq-c"]
workloads = {
    "W1": "publish 64 B, no confirms",
    "W2": "publish 64 B, confirms, 1,000 in flight",
    "W3": "consume 64 B, prefetch 500, multiple ack / 100",
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
lines += ["", "![CPU per message](benchmarks.png)", ""]
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
plot '{data_path}' using 2:xtic(1) title col, '' using 3 title col, '' using 4 title col
"""
subprocess.run(["gnuplot"], input=script, text=True, check=True)
os.remove(data_path)
print("\n".join(lines))
