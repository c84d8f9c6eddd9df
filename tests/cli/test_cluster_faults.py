"""The long-running commands on the three-node cluster (scripts/cluster-start.sh:
RMQ_CLUSTER_PORTS, RMQ_CLUSTER_DIRS) under faults (issue 39): the node a command is connected
to hangs (SIGSTOP past the heartbeat, then SIGCONT), is killed (SIGKILL, then started again
with its data), or sits behind a lossy link (tests/cluster/lossy_link.py: delays, stalls as
lost packets cost, and a partition past the heartbeat). `warren work run` and `warren log
append` go on through another node, and
after each run the invariants are checked against the broker: every confirmed put was done
(at least once) and nothing is left in the queue or its dead-letter queue; every printed offset
holds the line it was printed for. Each command exits by itself when its job ends.

The queues' leaders are placed on another node than the one the command dials first, so the
test is about the client: RabbitMQ notices a hung node only after net_ticktime (60 s), and a
quorum queue or stream led from it waits that long whoever the client is."""
import json
import os
import re
import signal
import subprocess
import tempfile
import threading
import time
import unittest
import uuid

import sys

import pika

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cluster"))
from lossy_link import LossyLink  # noqa: E402

WARREN = os.environ.get("WARREN", "")
PORTS = os.environ.get("RMQ_CLUSTER_PORTS", "").split()
DIRS = os.environ.get("RMQ_CLUSTER_DIRS", "").split()
SCRIPTS = os.environ.get("RMQ_SCRIPTS", "")
HANG_SECONDS = 6  # with ?heartbeat=1 the client gives the node up after about 2 s


def url(*nodes, heartbeat=None, first_port=None):
    """Nodes by index; `first_port` dialled first (a lossy link to node 1) when given."""
    hosts = ",".join(([f"127.0.0.1:{first_port}"] if first_port else []) + [f"127.0.0.1:{PORTS[n]}" for n in nodes])
    query = f"?heartbeat={heartbeat}" if heartbeat else ""
    return f"amqp://guest:guest@{hosts}/%2f{query}"


def node_pid(n):
    with open(os.path.join(DIRS[n], "rabbit.pid")) as f:
        return int(f.read().strip())


def lines_of(path):
    """The non-empty lines a worker's command appended to `path` so far (none before the first)."""
    try:
        with open(path) as f:
            return [line for line in f.read().split("\n") if line]
    except FileNotFoundError:
        return []


def records_of(stderr_text):
    """The JSON records of --log-format json among the command's stderr lines."""
    out = []
    for line in stderr_text.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
    return out


class ClusterFaults(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not WARREN or not os.path.exists(WARREN):
            raise RuntimeError("WARREN must name the built warren binary")
        if len(PORTS) != 3 or len(DIRS) != 3 or not SCRIPTS:
            raise RuntimeError("RMQ_CLUSTER_PORTS, RMQ_CLUSTER_DIRS and RMQ_SCRIPTS must name the cluster (scripts/test.sh)")

    def setUp(self):
        self.prefix = "cf-" + uuid.uuid4().hex[:8]
        self.tmp = tempfile.mkdtemp()

    def warren(self, *args, stdin=None, via=(1,), timeout=60):
        return subprocess.run([WARREN, *args, "--prefix", self.prefix, "--url", url(*via)], input=stdin,
                              capture_output=True, timeout=timeout)

    def ctl(self, n, *args):
        return subprocess.run([os.path.join(DIRS[n], "rabbitmqctl"), "-q", *args], capture_output=True, text=True,
                              timeout=60)

    def queue_counts(self, name, node=1):
        """(ready, unacknowledged) of a queue, asked of node 2 (never the faulted node 1)."""
        r = self.ctl(node, "list_queues", "name", "messages_ready", "messages_unacknowledged")
        self.assertEqual(r.returncode, 0, r.stderr)
        for line in r.stdout.splitlines():
            cols = line.split()
            if len(cols) == 3 and cols[0] == name:
                return int(cols[1]), int(cols[2])
        self.fail(f"no queue {name} in {r.stdout!r}")

    def hang(self, n, seconds=HANG_SECONDS):
        """SIGSTOP node n past the heartbeat, then SIGCONT (on a thread; join the result)."""
        pid = node_pid(n)

        def run():
            os.kill(pid, signal.SIGSTOP)
            try:
                time.sleep(seconds)
            finally:
                os.kill(pid, signal.SIGCONT)

        t = threading.Thread(target=run)
        t.start()
        return t

    def kill_and_restart(self, n):
        """SIGKILL node n, wait for it to be gone, start it again with its data."""
        pid = node_pid(n)
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.05)
        r = subprocess.run([os.path.join(SCRIPTS, "broker-start.sh"), DIRS[n], PORTS[n]],
                           env={**os.environ, "RMQ_KEEP_DATA": "1"}, capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)

    def lossy_link(self):
        """A lossy link to node 1, impaired from now on: every chunk delayed 1-25 ms, 3% of
        them stalled 200-800 ms (a lost packet's retransmission). link.blackout() partitions it."""
        link = LossyLink(PORTS[0], seed=int(os.environ.get("WARREN_TEST_SEED", "39")))
        self.addCleanup(link.close)
        link.impair(delay_ms=(1, 25), stall_chance=0.03, stall_ms=(200, 800))
        return link

    def assert_only_records(self, err):
        """Under --log-format json every stderr line is a record."""
        self.assertEqual([line for line in err.splitlines() if line.strip() and not line.startswith("{")], [],
                         "a line that is not a record under --log-format json")

    def wait_for(self, what, check, timeout=60, proc=None, show=None):
        """Poll check until true. On a timeout the failure says show()'s last state and, when proc
        is given, what the command said on stderr (it is killed to read it)."""
        deadline = time.monotonic() + timeout
        while not check():
            if proc is not None and proc.poll() is not None:
                out, err = proc.communicate()
                self.fail(f"{what}: the command ended first with {proc.returncode}: {err[-2000:]!r}")
            if time.monotonic() > deadline:
                state = f"; last seen: {show()}" if show is not None else ""
                said = ""
                if proc is not None:
                    proc.kill()
                    said = f"; the command said: {proc.communicate()[1][-3000:]!r}"
                self.fail(f"{what}: not within {timeout} s{state}{said}")
            time.sleep(0.05)

    # ---- the work queue

    def work_through(self, driver, fault):
        items = [f"item-{i:03d}" for i in range(60)]
        # Put through node 2 alone: the work queue's quorum leader is node 2's.
        r = self.warren("work", "put", "--queue", "jobs", "--driver", driver, stdin=("\n".join(items) + "\n").encode())
        self.assertEqual(r.returncode, 0, r.stderr)
        done_file = os.path.join(self.tmp, "done")
        link = self.lossy_link() if fault == "lossy" else None
        dial = url(1, 2, heartbeat=1, first_port=link.port) if link else url(0, 1, 2, heartbeat=1)
        worker = subprocess.Popen(
            [WARREN, "work", "run", "--queue", "jobs", "--prefix", self.prefix, "--driver", driver,
             "--exec", f"printf '%s\\n' \"$(cat)\" >> {done_file}; sleep 0.02",
             "--log-level", "info", "--log-format", "json", "--url", dial],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.addCleanup(lambda: worker.poll() is None and worker.kill())

        self.wait_for("the first 15 items", lambda: len(lines_of(done_file)) >= 15, proc=worker)
        if fault == "hang":
            t = self.hang(0)
            self.wait_for("every item, through another node", lambda: set(lines_of(done_file)) == set(items), timeout=90,
                          proc=worker)
            t.join()
        elif fault == "lossy":
            link.blackout(4.0)  # past two heartbeats of 1 s
            self.wait_for("every item, over the lossy link or another node", lambda: set(lines_of(done_file)) == set(items),
                          timeout=90, proc=worker)
        else:
            self.kill_and_restart(0)
            self.wait_for("every item, through another node", lambda: set(lines_of(done_file)) == set(items), timeout=90,
                          proc=worker)
        # Every item done: the queue is empty once the last ack is in, and nothing was dead-lettered.
        self.wait_for("the queue empty", lambda: self.queue_counts(f"{self.prefix}.jobs") == (0, 0), timeout=30,
                      proc=worker)
        self.assertEqual(self.queue_counts(f"{self.prefix}.jobs.dlq"), (0, 0))
        worker.send_signal(signal.SIGTERM)
        out, err = worker.communicate(timeout=30)
        self.assertEqual(worker.returncode, 0, err[-2000:])
        outcomes = [line.split() for line in out.splitlines()]
        self.assertTrue(all(o[0] == "done" and o[2] == "attempt=1" for o in outcomes), out)
        self.assertGreaterEqual(len(outcomes), len(items))
        events = [r["event"] for r in records_of(err)]
        self.assertIn("session.reconnected", events, err[-2000:])
        self.assert_only_records(err)
        print(f"[cluster-cli] work run ({driver}, node {fault}): {len(items)} items, {len(outcomes)} done lines, "
              f"{events.count('session.reconnecting')} reconnect attempt(s)" + (f", link {link.counts}" if link else ""))

    def test_work_run_goes_on_through_a_hung_node_uv(self):
        self.work_through("uv", "hang")

    def test_work_run_goes_on_through_a_hung_node_asio(self):
        self.work_through("asio", "hang")

    def test_work_run_goes_on_over_a_lossy_link_asio(self):
        self.work_through("asio", "lossy")

    def test_work_run_goes_on_when_its_node_is_killed_asio(self):
        self.work_through("asio", "kill")

    # ---- the log

    def append_through(self, driver, fault):
        lines = [f"line-{i:03d}" for i in range(60)]
        # The stream is declared through node 2 (its leader there) by the first line.
        r = self.warren("log", "append", "--log", "events", "--driver", driver, stdin=(lines[0] + "\n").encode())
        self.assertEqual(r.returncode, 0, r.stderr)
        first_offset = int(r.stdout.decode().strip())
        link = self.lossy_link() if fault == "lossy" else None
        dial = url(1, 2, heartbeat=1, first_port=link.port) if link else url(0, 1, 2, heartbeat=1)
        appender = subprocess.Popen(
            [WARREN, "log", "append", "--log", "events", "--prefix", self.prefix, "--driver", driver,
             "--log-level", "info", "--log-format", "json", "--url", dial],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.addCleanup(lambda: appender.poll() is None and appender.kill())
        printed = []

        def read_offsets():
            for line in appender.stdout:
                printed.append(int(line))

        reader = threading.Thread(target=read_offsets)
        reader.start()
        faulted = None
        for i, line in enumerate(lines[1:], start=1):
            appender.stdin.write(line + "\n")
            appender.stdin.flush()
            if i == 20:
                self.wait_for("20 offsets", lambda: len(printed) >= 19, proc=appender)
                if fault == "hang":
                    faulted = self.hang(0)
                elif fault == "lossy":
                    link.blackout(4.0)  # past two heartbeats of 1 s
                else:
                    self.kill_and_restart(0)
            time.sleep(0.05)
        appender.stdin.close()
        appender.wait(timeout=90)
        reader.join()
        err = appender.stderr.read()
        if faulted:
            faulted.join()
        self.assertEqual(appender.returncode, 0, err[-2000:])
        self.assertEqual(len(printed), len(lines) - 1, err[-2000:])
        # Every printed offset holds the line it was printed for (read through node 3).
        r = self.warren("log", "read", "--log", "events", "--from", str(first_offset), "--json", "--driver", driver,
                        "--count", str(len(lines) * 2), via=(2,), timeout=30)
        entries = {}
        for row in r.stdout.decode().splitlines():
            e = json.loads(row)
            entries[e["offset"]] = e["body"]
        for line, offset in zip(lines[1:], printed):
            self.assertEqual(entries.get(offset), line, f"offset {offset}")
        events = [rec["event"] for rec in records_of(err)]
        self.assertIn("session.reconnected", events, err[-2000:])
        self.assert_only_records(err)
        print(f"[cluster-cli] log append ({driver}, node {fault}): {len(printed)} offsets, "
              f"{len(entries) - len(lines)} entries appended twice" + (f", link {link.counts}" if link else ""))

    def test_log_append_goes_on_through_a_hung_node_uv(self):
        self.append_through("uv", "hang")

    def test_log_append_goes_on_over_a_lossy_link_uv(self):
        self.append_through("uv", "lossy")

    def test_log_append_goes_on_when_its_node_is_killed_uv(self):
        self.append_through("uv", "kill")

    def test_log_read_follow_goes_on_through_a_hung_node_asio(self):
        """A tail (`log read --follow`) whose node hangs: it consumes again through another node
        from the entry after the last it printed, so every entry is printed once, in order."""
        first = [f"early-{i:03d}" for i in range(20)]
        later = [f"later-{i:03d}" for i in range(40)]
        # Appended through node 2 alone, its leader there.
        r = self.warren("log", "append", "--log", "events", stdin=("\n".join(first) + "\n").encode())
        self.assertEqual(r.returncode, 0, r.stderr)
        offsets = [int(o) for o in r.stdout.decode().split()]
        reader = subprocess.Popen(
            [WARREN, "log", "read", "--log", "events", "--prefix", self.prefix, "--from", str(offsets[0]), "--follow",
             "--count", str(len(first) + len(later)), "--driver", "asio", "--log-level", "info", "--log-format", "json",
             "--url", url(0, 1, 2, heartbeat=1)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.addCleanup(lambda: reader.poll() is None and reader.kill())
        printed = []

        def read_lines():
            for line in reader.stdout:
                printed.append(line.rstrip("\n").split("\t", 1))

        t = threading.Thread(target=read_lines)
        t.start()
        self.wait_for("the first entries", lambda: len(printed) >= len(first), proc=reader)
        hung = self.hang(0)
        time.sleep(0.5)
        r = self.warren("log", "append", "--log", "events", stdin=("\n".join(later) + "\n").encode())
        self.assertEqual(r.returncode, 0, r.stderr)
        offsets += [int(o) for o in r.stdout.decode().split()]
        hung.join()
        reader.wait(timeout=60)
        t.join()
        err = reader.stderr.read()
        self.assertEqual(reader.returncode, 0, err[-2000:])
        self.assertEqual(printed, [[str(o), body] for o, body in zip(offsets, first + later)])
        events = [rec["event"] for rec in records_of(err)]
        self.assertIn("session.reconnected", events, err[-2000:])
        print(f"[cluster-cli] log read --follow (asio, node hang): {len(printed)} entries, each once, in order")

    # ---- a plain consumer

    def test_consume_goes_on_through_a_hung_node_uv(self):
        """`warren consume --count` whose node hangs: it consumes again through another node, and
        prints every message (at least once: what it printed and had not acked yet comes again),
        then exits 0 with the queue empty."""
        q = f"{self.prefix}.plain"
        connection = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", int(PORTS[1])))
        self.addCleanup(connection.close)
        channel = connection.channel()
        channel.queue_declare(q, durable=True, arguments={"x-queue-type": "quorum"})  # led by node 2
        channel.confirm_delivery()
        bodies = [f"message-{i:03d}" for i in range(60)]
        consumer = subprocess.Popen(
            [WARREN, "consume", "--queue", q, "--count", str(len(bodies)), "--prefetch", "5", "--driver", "uv",
             "--log-level", "info", "--log-format", "json", "--url", url(0, 1, 2, heartbeat=1)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.addCleanup(lambda: consumer.poll() is None and consumer.kill())
        printed = []

        def read_lines():
            for line in consumer.stdout:
                printed.append(line.rstrip("\n"))

        t = threading.Thread(target=read_lines)
        t.start()
        for b in bodies[:20]:
            channel.basic_publish("", q, b.encode(), pika.BasicProperties(delivery_mode=2))
        self.wait_for("the first 20", lambda: len(printed) >= 20, proc=consumer)
        hung = self.hang(0)
        time.sleep(0.5)
        for b in bodies[20:]:
            channel.basic_publish("", q, b.encode(), pika.BasicProperties(delivery_mode=2))
        hung.join()
        consumer.wait(timeout=60)
        t.join()
        err = consumer.stderr.read()
        # The previous binary exited 1 ("timed out: no traffic from the broker ...").
        self.assertEqual(consumer.returncode, 0, err[-2000:])
        self.assertEqual(len(printed), len(bodies), err[-2000:])
        self.assertEqual(printed[:20], bodies[:20])
        # Every message printed; any printed twice was one whose ack the hang took (at most
        # the prefetch's 5), and displaced one the count then left in the queue.
        self.assertLessEqual(set(printed), set(bodies), "a stranger was printed")
        missing = set(bodies) - set(printed)
        twice = len(printed) - len(set(printed))
        self.assertEqual(len(missing), twice, f"missing {sorted(missing)}")
        self.assertLessEqual(twice, 5, "more printed again than the prefetch let be unacked")
        events = [rec["event"] for rec in records_of(err)]
        self.assertIn("session.reconnected", events, err[-2000:])
        self.assert_only_records(err)
        # What --count left unprinted is still in the queue, never lost.
        self.wait_for("the rest in the queue", lambda: self.queue_counts(q) == (len(missing), 0), timeout=30)
        print(f"[cluster-cli] consume (uv, node hang): {len(printed)} printed, {twice} twice")

    # ---- the pipe

    def pipe_through(self, driver, fault):
        """`warren pipe` from a quorum queue to another (both led by node 2) while the node it is
        connected to hangs or is killed: it takes records again through another node, and every
        source record ends in the destination (at least once), the source left empty."""
        src, dst = f"{self.prefix}.src", f"{self.prefix}.dst"
        records = [f"record-{i:03d}" for i in range(60)]
        connection = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", int(PORTS[1])))
        self.addCleanup(connection.close)
        channel = connection.channel()
        for q in (src, dst):
            channel.queue_declare(q, durable=True, arguments={"x-queue-type": "quorum"})
        channel.confirm_delivery()
        for r in records:
            channel.basic_publish("", src, r.encode(), pika.BasicProperties(delivery_mode=2))
        status = os.path.join(self.tmp, "status.json")
        pipe = subprocess.Popen(
            [WARREN, "pipe", "--from", src, "--to", "", "--routing-key", dst, "--driver", driver,
             "--exec", "cat; sleep 0.05", "--concurrency", "2", "--on-error", "requeue", "--status", status,
             "--log-level", "info", "--log-format", "json", "--url", url(0, 1, 2, heartbeat=1)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.addCleanup(lambda: pipe.poll() is None and pipe.kill())

        def moved():
            return channel.queue_declare(dst, passive=True).method.message_count

        self.wait_for("the first 15 records", lambda: moved() >= 15, proc=pipe)
        if fault == "hang":
            t = self.hang(0)
            self.wait_for("every record, through another node", lambda: moved() >= len(records), timeout=90, proc=pipe)
            t.join()
        else:
            self.kill_and_restart(0)
            self.wait_for("every record, through another node", lambda: moved() >= len(records), timeout=90, proc=pipe)
        # The source is empty once the last ack is in.
        self.wait_for("the source empty", lambda: channel.queue_declare(src, passive=True).method.message_count == 0,
                      timeout=30, proc=pipe)
        pipe.send_signal(signal.SIGTERM)
        out, err = pipe.communicate(timeout=30)
        self.assertEqual(pipe.returncode, 0, err[-2000:])
        bodies = []
        while True:
            _, _, body = channel.basic_get(dst, auto_ack=True)
            if body is None:
                break
            bodies.append(body.decode())
        self.assertEqual(set(bodies), set(records), "a source record is missing from the destination")
        events = [r["event"] for r in records_of(err)]
        self.assertIn("session.reconnected", events, err[-2000:])
        # Said once, as a record like every other line under --log-format json.
        said = [r for r in records_of(err) if r["event"] == "pipe.taking_again"]
        self.assertEqual(len(said), 1, err[-2000:])
        self.assertIn("taking records again once connected", said[0]["cause"])
        self.assertEqual(said[0]["level"], "warning")
        self.assert_only_records(err)
        with open(status) as f:
            final = json.load(f)
        self.assertEqual(final["state"], "stopped")
        self.assertGreaterEqual(final["completed"], len(records))  # the counts carry over the loss
        print(f"[cluster-cli] pipe ({driver}, node {fault}): {len(records)} records, {len(bodies)} in the destination, "
              f"completed {final['completed']}, dropped {final['dropped']}")

    def test_pipe_goes_on_through_a_hung_node_uv(self):
        self.pipe_through("uv", "hang")

    def test_pipe_goes_on_when_its_node_is_killed_asio(self):
        self.pipe_through("asio", "kill")

    # ---- a leader that hangs while the connection's node lives

    def test_put_and_append_go_on_while_the_leader_of_their_queue_hangs(self):
        """The soak's two defects (issue 39): the node that leads the work queue and the stream
        hangs past the publish timeout (10 s) while the node the commands are connected to lives.
        No confirm comes in time, or the quorum queue nacks: `work put` and `log append` exited 1.
        Either outcome leaves the message to be made again, and both go on once the leader is back."""
        items = [f"item-{i:03d}" for i in range(40)]
        lines = [f"line-{i:03d}" for i in range(40)]
        # Declared through node 2 alone: the work queue's and the stream's leader is node 2.
        r = self.warren("work", "put", "--queue", "jobs", "--body", "seed")
        self.assertEqual(r.returncode, 0, r.stderr)
        r = self.warren("log", "append", "--log", "events", stdin=b"seed\n")
        self.assertEqual(r.returncode, 0, r.stderr)
        first_offset = int(r.stdout.decode().strip())
        common = ["--prefix", self.prefix, "--url", url(0, 2, heartbeat=1)]
        put = subprocess.Popen([WARREN, "work", "put", "--queue", "jobs", "--driver", "uv", *common],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        appender = subprocess.Popen([WARREN, "log", "append", "--log", "events", "--driver", "asio", *common],
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for p in (put, appender):
            self.addCleanup(lambda p=p: p.poll() is None and p.kill())
        printed = []

        def read_offsets():
            for line in appender.stdout:
                printed.append(int(line))

        reader = threading.Thread(target=read_offsets)
        reader.start()
        hung = None
        for i, (item, line) in enumerate(zip(items, lines)):
            put.stdin.write(item + "\n")
            put.stdin.flush()
            appender.stdin.write(line + "\n")
            appender.stdin.flush()
            if i == 10:
                self.wait_for("10 offsets", lambda: len(printed) >= 10, proc=appender)
                hung = self.hang(1, seconds=13)
            time.sleep(0.05)
        put.stdin.close()
        appender.stdin.close()
        hung.join()
        put.wait(timeout=90)
        put_err = put.stderr.read()
        appender.wait(timeout=90)
        reader.join()
        append_err = appender.stderr.read()
        self.assertEqual(put.returncode, 0, put_err[-2000:])
        self.assertEqual(appender.returncode, 0, append_err[-2000:])
        # A line said to be appended again is named by its place in the input, not by how far
        # the input was read ahead.
        for said in append_err.splitlines():
            number = re.match(r"warren: log append \S+: line (\d+): ", said)
            self.assertIsNotNone(number, said)
            self.assertLessEqual(int(number.group(1)), 20, "the line in flight as the leader hung, not the last read")
            self.assertGreater(int(number.group(1)), 10, "the leader hung after the tenth line")
        # Every line's offset holds it.
        self.assertEqual(len(printed), len(lines), append_err[-2000:])
        r = self.warren("log", "read", "--log", "events", "--from", str(first_offset), "--json",
                        "--count", str(len(lines) * 3), via=(2,), timeout=30)
        entries = {}
        for row in r.stdout.decode().splitlines():
            e = json.loads(row)
            entries[e["offset"]] = e["body"]
        for line, offset in zip(lines, printed):
            self.assertEqual(entries.get(offset), line, f"offset {offset}")
        # Every item is in the queue at least once: taken with basic.get through node 3 until
        # the queue is empty (its leader answers; list_queues counts lag after a hang).
        connection = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", int(PORTS[2])))
        self.addCleanup(connection.close)
        channel = connection.channel()
        bodies = []
        while True:
            _, _, body = channel.basic_get(f"{self.prefix}.jobs", auto_ack=True)
            if body is None:
                break
            bodies.append(body.decode())
        self.assertEqual(set(bodies), set(items) | {"seed"}, "a confirmed put is missing, or a stranger is there")
        print(f"[cluster-cli] leader hung 13 s: {len(items)} items put as {len(bodies) - 1} messages, "
              f"{len(lines)} lines appended as {len(entries) - 1} entries; said: {(put_err + append_err).strip()!r}")

    # ---- a leader that moves

    def node_name(self, n):
        with open(os.path.join(DIRS[n], "broker.env")) as f:
            for line in f:
                if line.startswith("RMQ_NODE="):
                    return line.strip().split("=", 1)[1]
        self.fail(f"no RMQ_NODE in {DIRS[n]}/broker.env")

    def queues_tool(self, n, *args):
        """rabbitmq-queues ARGS on node n."""
        r = subprocess.run([os.path.join(DIRS[n], "rabbitmqctl"), *args], env={**os.environ, "RMQ_TOOL": "rabbitmq-queues"},
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, f"rabbitmq-queues {' '.join(args)}: {r.stdout} {r.stderr}")
        return r.stdout

    def queue_members(self, queue, n=2):
        r = self.ctl(n, "list_queues", "name", "members", "online")
        return [line for line in r.stdout.splitlines() if line.startswith(queue + "\t") or line.startswith(queue + " ")]

    def leader_of(self, queue, n=2):
        r = self.ctl(n, "list_queues", "name", "leader")
        self.assertEqual(r.returncode, 0, r.stderr)
        for line in r.stdout.splitlines():
            cols = line.split()
            if len(cols) == 2 and cols[0] == queue:
                return cols[1]
        self.fail(f"no queue {queue} in {r.stdout!r}")

    def test_put_and_work_go_on_while_their_queue_leader_moves(self):
        """The work queue's leader moves (its member on the leader's node removed, as RabbitMQ
        3.10 moves a leader without stopping a node) while a put streams items at 20 a second and
        a worker takes them: every confirmed put is done, at least once, and neither command
        ends."""
        items = [f"item-{i:03d}" for i in range(60)]
        queue = f"{self.prefix}.jobs"
        # Declared through node 2 alone: the work queue's leader is node 2.
        r = self.warren("work", "put", "--queue", "jobs", "--body", "seed")
        self.assertEqual(r.returncode, 0, r.stderr)
        node2 = self.node_name(1)
        self.assertEqual(self.leader_of(queue), node2)
        done_file = os.path.join(self.tmp, "done")
        common = ["--prefix", self.prefix, "--log-format", "json", "--url", url(0, 2, heartbeat=1)]
        worker = subprocess.Popen([WARREN, "work", "run", "--queue", "jobs", "--driver", "uv", "--prefetch", "4",
                                   "--exec", f"printf '%s\\n' \"$(cat)\" >> {done_file}", *common],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        put = subprocess.Popen([WARREN, "work", "put", "--queue", "jobs", "--driver", "asio", *common],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for p in (put, worker):
            self.addCleanup(lambda p=p: p.poll() is None and p.kill())

        moved = False
        for i, item in enumerate(items):
            put.stdin.write(item + "\n")
            put.stdin.flush()
            if i == 20:
                self.wait_for("the first items done", lambda: len(lines_of(done_file)) >= 10, proc=worker)
                self.queues_tool(0, "delete_member", queue, node2)
                moved = True
            time.sleep(0.05)
        self.assertTrue(moved)
        put.stdin.close()
        put.wait(timeout=90)
        put_err = put.stderr.read()
        self.assertEqual(put.returncode, 0, put_err[-2000:])
        self.assert_only_records(put_err)
        self.wait_for("every item done", lambda: set(items) | {"seed"} <= set(lines_of(done_file)), timeout=60, proc=worker)
        self.assertNotEqual(self.leader_of(queue), node2, "the leader moved off node 2")
        self.queues_tool(0, "add_member", queue, node2)  # the cluster as it was
        self.wait_for("the queue empty", lambda: self.queue_counts(queue) == (0, 0), timeout=30, proc=worker,
                      show=lambda: (f"(ready, unacked) {self.queue_counts(queue)} on node 2, "
                                    f"{self.queue_counts(queue, node=0)} on node 1, leader {self.leader_of(queue)}, "
                                    f"{len(lines_of(done_file))} runs, members {self.queue_members(queue)}"))
        self.assertEqual(self.queue_counts(f"{queue}.dlq"), (0, 0))
        worker.send_signal(signal.SIGTERM)
        out, err = worker.communicate(timeout=30)
        self.assertEqual(worker.returncode, 0, err[-2000:])
        self.assert_only_records(err)
        done = lines_of(done_file)
        print(f"[cluster-cli] leader moved: {len(items)} items put, {len(done)} runs "
              f"({len(done) - len(set(done))} again); said: {len(put_err.splitlines())} put line(s), "
              f"{len(err.splitlines())} worker line(s)")


if __name__ == "__main__":
    unittest.main(verbosity=2)
