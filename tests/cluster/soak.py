"""The long run of issue 39 (tests/cluster/soak.sh MINUTES [SEED]; not in the test command).

On a three-node cluster of its own (scripts/cluster-start.sh), under steady load for MINUTES:
- the work queue: `warren work put` fed about 40 items a second, two `warren work run` workers
  (one per driver) appending each item's body to a file of their own;
- the log: `warren log append` fed about 20 lines a second (asio), its printed offsets kept,
  and a tail (`warren log read --follow`, uv) printing every entry as it comes;
- the pipe: a second `warren work put` (asio) fed about 20 records a second into a queue that
  `warren pipe` (uv, --exec cat) moves into another;
while faults are drawn at random from SEED every 20-40 s, each on a node drawn the same way:
hang (SIGSTOP for 5-15 s, then SIGCONT; only nodes 1 and 3, which lead no queue), kill
(SIGKILL, then started again with its data; any node), a partition of the link to node 1
(nothing forwarded for 5-15 s), or nothing. Every process dials all three hosts with
?heartbeat=2, node 1 through a lossy link (tests/cluster/lossy_link.py: every chunk delayed
1-10 ms, 1% of them stalled 200-800 ms as a lost packet's retransmission would). Every 5 s the
resident memory (RSS) of each warren process is sampled.

At the end the producers stop, the workers drain the queue, and the invariants are checked:
every confirmed put was done at least once (each worker's file), nothing is left in the queue
or its dead-letter queue, no item was dead-lettered or retried (attempt=1 on every line);
every printed offset holds its line, and the tail printed every entry once, in order; every
record put into the pipe's source is in its destination and the source is empty; no warren
process ended by itself; each process's RSS growth. When one breaks, the nodes' data is kept
(stopped, not purged) for a look at what broke. The figures are printed as one block of Markdown (docs/reliability.md holds a run's).
"""
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WARREN = os.environ.get("WARREN", os.path.join(ROOT, "build", "tools", "warren"))
SCRIPTS = os.path.join(ROOT, "scripts")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lossy_link import LossyLink  # noqa: E402


PRODUCERS = ("put", "append", "pipe-put")  # end with their input; the others run until stopped


def rss_kb(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


class Soak:
    def __init__(self, minutes, seed):
        self.minutes = minutes
        self.seed = seed
        self.rng = random.Random(seed)
        self.dir = tempfile.mkdtemp(prefix="warren-soak.")
        self.prefix = f"soak{seed}"
        self.faults = {"hang": 0, "kill": 0, "partition": 0, "none": 0}
        self.link = None  # the lossy link to node 1, once the cluster is up
        self.keep = True  # the nodes' data, unless every invariant held
        self.fault_log = []
        self.rss = {}  # name -> [kb, ...]
        self.procs = {}
        self.stop = threading.Event()

    def start_cluster(self):
        r = subprocess.run([os.path.join(SCRIPTS, "cluster-start.sh"), os.path.join(self.dir, "cluster")],
                           capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            raise RuntimeError("cluster-start.sh failed: " + r.stderr)
        env = dict(line.split("=", 1) for line in r.stdout.split("\n") if "=" in line)
        self.ports = env["RMQ_CLUSTER_PORTS"].strip('"').split()
        self.dirs = env["RMQ_CLUSTER_DIRS"].strip('"').split()
        self.link = LossyLink(self.ports[0], seed=self.seed)
        self.link.impair(delay_ms=(1, 10), stall_chance=0.01, stall_ms=(200, 800))

    def stop_cluster(self, purge=True):
        """Stops the nodes; their data stays (for a look at what broke) unless `purge`."""
        if self.link:
            self.link.close()
        subprocess.run([os.path.join(SCRIPTS, "cluster-stop.sh"), os.path.join(self.dir, "cluster")]
                       + (["--purge"] if purge else []), capture_output=True, timeout=300)
        if not purge:
            print(f"[soak] an invariant broke: the nodes' data is kept in {self.dir}/cluster", flush=True)

    def url(self, nodes=(0, 1, 2)):
        # Node 1 only through the lossy link.
        hosts = ",".join(f"127.0.0.1:{self.link.port if n == 0 else self.ports[n]}" for n in nodes)
        return f"amqp://guest:guest@{hosts}/%2f?heartbeat=2"

    def spawn(self, name, args, stdin=False, prefix=True):
        out = open(os.path.join(self.dir, name + ".out"), "w")
        err = open(os.path.join(self.dir, name + ".err"), "w")
        named = ["--prefix", self.prefix] if prefix else []  # pipe names its queues in full
        p = subprocess.Popen([WARREN, *args, *named, "--url", self.url()],
                             stdin=subprocess.PIPE if stdin else subprocess.DEVNULL, stdout=out, stderr=err, text=True)
        self.procs[name] = p
        return p

    def feeder(self, name, proc, rate, make):
        """Writes make(i) to proc's stdin at `rate` lines a second until stopped; returns the count."""
        def run():
            i = 0
            period = 1.0 / rate
            next_at = time.monotonic()
            while not self.stop.is_set():
                try:
                    proc.stdin.write(make(i) + "\n")
                    proc.stdin.flush()
                except (BrokenPipeError, ValueError):
                    break
                i += 1
                next_at += period
                time.sleep(max(0.0, next_at - time.monotonic()))
            self.fed[name] = i
            try:
                proc.stdin.close()
            except (BrokenPipeError, ValueError):
                pass
        t = threading.Thread(target=run)
        t.start()
        return t

    def sample_rss(self):
        while not self.stop.wait(5):
            for name, p in self.procs.items():
                kb = rss_kb(p.pid)
                if kb is not None:
                    self.rss.setdefault(name, []).append(kb)

    def node_pid(self, n):
        with open(os.path.join(self.dirs[n], "rabbit.pid")) as f:
            return int(f.read().strip())

    def inject(self):
        deadline = time.monotonic() + self.minutes * 60
        while time.monotonic() < deadline - 30:
            if self.stop.wait(self.rng.uniform(20, 40)):
                return
            kind = self.rng.choice(["hang", "hang", "kill", "partition", "none"])
            # A hang only of a node that leads neither queue (node 2 leads both): the others give
            # a hung node up only after net_ticktime (60 s), and what it leads answers nothing
            # until then, whatever the client (docs/warren-cli.md). A kill is seen at once.
            node = self.rng.choice([0, 2]) if kind == "hang" else self.rng.randrange(3)
            self.faults[kind] += 1
            began = time.monotonic()
            if kind == "hang":
                seconds = self.rng.uniform(5, 15)
                pid = self.node_pid(node)
                os.kill(pid, signal.SIGSTOP)
                time.sleep(seconds)
                os.kill(pid, signal.SIGCONT)
                self.fault_log.append(f"hang node {node + 1} for {seconds:.1f} s")
            elif kind == "partition":
                seconds = self.rng.uniform(5, 15)
                self.link.blackout(seconds)
                time.sleep(seconds)
                self.fault_log.append(f"partition of the link to node 1 for {seconds:.1f} s")
            elif kind == "kill":
                pid = self.node_pid(node)
                os.kill(pid, signal.SIGKILL)
                while True:
                    try:
                        os.kill(pid, 0)
                        time.sleep(0.05)
                    except ProcessLookupError:
                        break
                # A node slow to come back (a loaded host) is waited for, not the end of the run.
                back = True
                for step in ([os.path.join(SCRIPTS, "broker-start.sh"), self.dirs[node], self.ports[node]],
                             [os.path.join(self.dirs[node], "rabbitmqctl"), "-q", "await_online_nodes", "3", "-t", "600"]):
                    try:
                        subprocess.run(step, env={**os.environ, "RMQ_KEEP_DATA": "1"}, capture_output=True, timeout=660)
                    except subprocess.TimeoutExpired:
                        back = False
                self.fault_log.append(f"kill node {node + 1}, back after {time.monotonic() - began:.1f} s"
                                      + ("" if back else " (not all three nodes online after it)"))
            else:
                self.fault_log.append("none")
            print(f"[soak] {time.strftime('%H:%M:%S')} {self.fault_log[-1]}", flush=True)

    def queue_counts(self, name):
        for n in range(3):
            r = subprocess.run([os.path.join(self.dirs[n], "rabbitmqctl"), "-q", "list_queues", "name", "messages_ready",
                                "messages_unacknowledged"], capture_output=True, text=True, timeout=60)
            if r.returncode != 0:
                continue
            for line in r.stdout.splitlines():
                cols = line.split()
                if len(cols) == 3 and cols[0] == name:
                    return int(cols[1]), int(cols[2])
        return None

    def run(self):
        self.fed = {}
        self.start_cluster()
        failures = []
        try:
            # The queues first, through node 2, so neither leader is on node 1 (the first host dialled).
            subprocess.run([WARREN, "work", "put", "--queue", "jobs", "--prefix", self.prefix, "--body", "warm-up",
                            "--url", self.url((1,))], check=True, capture_output=True, timeout=60)
            subprocess.run([WARREN, "log", "append", "--log", "events", "--prefix", self.prefix, "--url", self.url((1,))],
                           input="warm-up\n", check=True, capture_output=True, text=True, timeout=60)
            # The pipe's source and destination: two more work queues (quorum), through node 2 too.
            for q in ("pipein", "pipeout"):
                subprocess.run([WARREN, "work", "put", "--queue", q, "--prefix", self.prefix, "--body", "warm-up",
                                "--url", self.url((1,))], check=True, capture_output=True, timeout=60)
            done_files = {d: os.path.join(self.dir, f"done-{d}") for d in ("uv", "asio")}
            for d, path in done_files.items():
                # One write per item (the commands of one worker run at once): a line never interleaves.
                self.spawn(f"worker-{d}", ["work", "run", "--queue", "jobs", "--driver", d, "--prefetch", "4",
                                           "--exec", f"printf '%s\\n' \"$(cat)\" >> {path}", "--log-level", "warning"])
            putter = self.spawn("put", ["work", "put", "--queue", "jobs", "--driver", "uv", "--log-level", "warning"],
                                stdin=True)
            appender = self.spawn("append", ["log", "append", "--log", "events", "--driver", "asio",
                                             "--log-level", "warning"], stdin=True)
            self.spawn("tail", ["log", "read", "--log", "events", "--from", "first", "--follow", "--driver", "uv",
                                "--log-level", "warning"])
            self.spawn("pipe", ["pipe", "--from", f"{self.prefix}.pipein", "--to", "", "--routing-key",
                                f"{self.prefix}.pipeout", "--exec", "cat", "--concurrency", "2", "--on-error", "requeue",
                                "--driver", "uv", "--log-level", "warning"], prefix=False)
            pipe_putter = self.spawn("pipe-put", ["work", "put", "--queue", "pipein", "--driver", "asio",
                                                  "--log-level", "warning"], stdin=True)
            feeders = [self.feeder("put", putter, 40, lambda i: f"item-{i:07d}"),
                       self.feeder("append", appender, 20, lambda i: f"line-{i:07d}"),
                       self.feeder("pipe-put", pipe_putter, 20, lambda i: f"record-{i:07d}")]
            sampler = threading.Thread(target=self.sample_rss)
            sampler.start()
            injector = threading.Thread(target=self.inject)
            injector.start()
            started = time.monotonic()
            while time.monotonic() - started < self.minutes * 60:
                for name, p in self.procs.items():
                    if p.poll() is not None and name not in PRODUCERS:
                        failures.append(f"{name} ended by itself with {p.returncode}")
                if failures:
                    break
                time.sleep(1)
            self.stop.set()
            injector.join()
            for f in feeders:
                f.join()
            sampler.join()
            # The producers end with their input; then the workers drain the queue.
            for name in PRODUCERS:
                rc = self.procs[name].wait(timeout=120)
                if rc != 0:
                    failures.append(f"{name} exited {rc}")
            # Drained when every item fed is done and every record fed is in the pipe's
            # destination (list_queues' counts of a quorum queue lag, more so after a fault:
            # they say when the queues are empty only once the work is seen done).
            items = {f"item-{i:07d}" for i in range(self.fed.get("put", 0))}
            records = self.fed.get("pipe-put", 0)
            # The consumers may trail the producers on a loaded host: waited for while they make
            # progress (at most 15 minutes), not for a fixed time.
            deadline = time.monotonic() + 900
            last, moved_at = -1, time.monotonic()
            while time.monotonic() < deadline and time.monotonic() - moved_at < 60:
                out = self.queue_counts(f"{self.prefix}.pipeout") or (0, 0)
                done_now = self.done_lines(done_files)
                if items <= set(done_now) and out[0] >= records + 1:
                    break
                if len(done_now) + out[0] != last:
                    last, moved_at = len(done_now) + out[0], time.monotonic()
                time.sleep(1)
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and (self.queue_counts(f"{self.prefix}.jobs") != (0, 0) or
                                                   self.queue_counts(f"{self.prefix}.pipein") != (0, 0)):
                time.sleep(1)
            time.sleep(3)  # the tail's last entries
            # The workers (the work queue's and the pipe) end with exit 0 on SIGTERM; the tail by the signal.
            for name, expected in (("worker-uv", 0), ("worker-asio", 0), ("pipe", 0), ("tail", -signal.SIGTERM)):
                p = self.procs[name]
                if p.poll() is not None:
                    failures.append(f"{name} ended by itself with {p.returncode}")
                    continue
                p.send_signal(signal.SIGTERM)
                rc = p.wait(timeout=60)
                if rc != expected:
                    failures.append(f"{name} exited {rc} after SIGTERM")
            result = self.check(done_files, failures)
            self.keep = result != 0
            return result
        finally:
            self.stop.set()
            for p in self.procs.values():
                if p.poll() is None:
                    p.kill()
            self.stop_cluster(purge=not self.keep)

    @staticmethod
    def done_lines(done_files):
        done = []
        for path in done_files.values():
            try:
                with open(path) as f:
                    done += [line for line in f.read().split("\n") if line]
            except FileNotFoundError:
                pass
        return done

    def check(self, done_files, failures):
        put_lines = self.fed.get("put", 0)
        # work put prints nothing per item; it exits 0 only when every line read was confirmed.
        done = self.done_lines(done_files)
        items = {f"item-{i:07d}" for i in range(put_lines)}
        missing = items - set(done)
        if self.procs["put"].returncode == 0 and missing:
            failures.append(f"{len(missing)} confirmed put(s) never done, e.g. {sorted(missing)[:3]}")
        counts = self.queue_counts(f"{self.prefix}.jobs")
        if counts != (0, 0):
            failures.append(f"the work queue still holds {counts}")
        dlq = self.queue_counts(f"{self.prefix}.jobs.dlq")
        if dlq not in (None, (0, 0)):
            failures.append(f"the dead-letter queue holds {dlq}")
        outcomes = []
        for d in ("uv", "asio"):
            with open(os.path.join(self.dir, f"worker-{d}.out")) as f:
                outcomes += [line.split() for line in f if line.strip()]
        not_first = [o for o in outcomes if o[0] != "done" or o[2] != "attempt=1"]
        if not_first:
            failures.append(f"{len(not_first)} outcome(s) other than a first-attempt done, e.g. {not_first[:3]}")
        # The log: every printed offset holds the line it was printed for.
        with open(os.path.join(self.dir, "append.out")) as f:
            offsets = [int(line) for line in f if line.strip()]
        r = subprocess.run([WARREN, "log", "read", "--log", "events", "--prefix", self.prefix, "--from", "first", "--json",
                            "--url", self.url((1, 2))], capture_output=True, text=True, timeout=300)
        entries = {}
        for row in r.stdout.splitlines():
            e = json.loads(row)
            entries[e["offset"]] = e.get("body")
        wrong = [(i, o) for i, o in enumerate(offsets) if entries.get(o) != f"line-{i:07d}"]
        if wrong:
            failures.append(f"{len(wrong)} printed offset(s) not holding their line, e.g. {wrong[:3]}")
        twice = len(entries) - 1 - len(offsets)  # less the warm-up entry
        # The tail: every entry of the log once, in order, each with its body.
        with open(os.path.join(self.dir, "tail.out")) as f:
            tailed = [line.rstrip("\n").split("\t", 1) for line in f if line.strip()]
        tailed_offsets = [int(t[0]) for t in tailed]
        if tailed_offsets != sorted(entries):
            failures.append(f"the tail printed {len(tailed_offsets)} entries, the log holds {len(entries)} "
                            f"(in order and once each: {tailed_offsets == sorted(set(tailed_offsets))})")
        wrong_tail = [t for t in tailed if entries.get(int(t[0])) != t[1]]
        if wrong_tail:
            failures.append(f"{len(wrong_tail)} tailed entries not the log's, e.g. {wrong_tail[:3]}")
        # The pipe: every record put into its source is in its destination (at least once).
        records = self.fed.get("pipe-put", 0)
        # All of it, read until 20 s pass: a quorum queue's list_queues count can lag after a
        # hang, and a count taken from it read too few (the run at 50d220f).
        r = subprocess.run([WARREN, "consume", "--queue", f"{self.prefix}.pipeout", "--timeout", "20",
                            "--url", self.url((1, 2))], capture_output=True, text=True, timeout=300)
        moved = [line for line in r.stdout.splitlines() if line]
        missing_records = {f"record-{i:07d}" for i in range(records)} - set(moved)
        if self.procs["pipe-put"].returncode == 0 and missing_records:
            # Read, not counted: a quorum queue's list_queues counts can lag after a hang.
            r = subprocess.run([WARREN, "consume", "--queue", f"{self.prefix}.pipein", "--timeout", "15",
                                "--url", self.url((1, 2))], capture_output=True, text=True, timeout=120)
            in_source = missing_records & {line for line in r.stdout.splitlines() if line}
            if in_source:
                failures.append(f"{len(in_source)} record(s) still in the pipe's source, not moved, "
                                f"e.g. {sorted(in_source)[:3]}")
            lost = missing_records - in_source
            if lost:
                failures.append(f"{len(lost)} record(s) put into the pipe neither in its destination nor its "
                                f"source (lost), e.g. {sorted(lost)[:3]}")
        else:
            pipein = self.queue_counts(f"{self.prefix}.pipein")
            if pipein != (0, 0):
                failures.append(f"the pipe's source still holds {pipein}")
        rss_lines = []
        for name, samples in sorted(self.rss.items()):
            if samples:
                rss_lines.append(f"| {name} | {samples[0] / 1024:.1f} | {samples[-1] / 1024:.1f} | {max(samples) / 1024:.1f} |")
        print()
        print(f"Seed {self.seed}, {self.minutes} minutes, warren {WARREN}.")
        print()
        print(f"- faults: {self.faults['hang']} hang(s), {self.faults['kill']} kill(s), "
              f"{self.faults['partition']} partition(s) of the link to node 1, {self.faults['none']} quiet turn(s); "
              f"the lossy link: {self.link.counts['connections']} connections, {self.link.counts['stalls']} stalls")
        print(f"- work queue: {put_lines} items put, {len(done)} runs ({len(done) - len(set(done))} again after a fault), "
              f"{len(outcomes)} result lines")
        print(f"- log: {len(offsets)} lines appended, {max(twice, 0)} appended twice after a fault; "
              f"the tail printed {len(tailed)} entries")
        print(f"- pipe: {records} records put into its source, {len(moved) - 1} outputs in its destination "
              f"({len(moved) - 1 - len(set(moved) - {'warm-up'})} again after a fault)")
        print(f"- invariants: {'held' if not failures else 'BROKEN: ' + '; '.join(failures)}")
        print()
        print("| process | RSS at start (MiB) | RSS at end (MiB) | peak (MiB) |")
        print("|---|---:|---:|---:|")
        for line in rss_lines:
            print(line)
        print()
        for entry in self.fault_log:
            print(f"  {entry}")
        return 0 if not failures else 1


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print("usage: soak.sh MINUTES [SEED]", file=sys.stderr)
        sys.exit(2)
    minutes = float(sys.argv[1])
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else random.SystemRandom().randrange(1, 1 << 31)
    sys.exit(Soak(minutes, seed).run())
