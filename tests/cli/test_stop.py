"""SIGTERM and SIGINT at every phase of every warren command that runs longer than one call
(docs/warren-cli.md, "STOPPING"): while it dials a broker that never answers (with its metrics
endpoint up), while it waits on standard input, while it waits on a broker that took its lines
and confirms nothing, and once it works. Each stop must end the process within about two
seconds with the status and the one stderr line the manual fixes, and leave no process of its
own behind (found by a marker in the environment every child inherits)."""
import fcntl
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import termios
import threading
import time
import unittest
import uuid

import pika

sys.path.insert(0, os.path.dirname(__file__))
from cli_env import WARREN, PORT, CTL, URL, require_warren_and_broker, unique, warren  # noqa: E402
import fake_broker  # noqa: E402

STOP_WITHIN_S = 2.5
SIGNALS = ((signal.SIGTERM, "uv"), (signal.SIGINT, "asio"))  # both drivers, one signal each


def processes_marked(mark):
    """Every live process whose environment holds `mark` (a command's children inherit it)."""
    found = []
    for path in glob.glob("/proc/[0-9]*/environ"):
        try:
            with open(path, "rb") as f:
                if mark.encode() in f.read():
                    pid = int(path.split("/")[2])
                    with open(f"/proc/{pid}/stat") as s:
                        if s.read().rsplit(")", 1)[1].split()[0] != "Z":
                            found.append(pid)
        except OSError:
            pass
    return found


def waiting_on_stdin(pid):
    """A thread of `pid` is blocked in read(0, ...) (x86-64: syscall 0 on descriptor 0)."""
    for path in glob.glob(f"/proc/{pid}/task/*/syscall"):
        try:
            with open(path) as f:
                if f.read().startswith("0 0x0 "):
                    return True
        except OSError:
            pass
    return False


def read(path):
    with open(path, "rb") as f:
        return f.read().decode(errors="replace")


def unread(pipe):
    """Bytes written to the command's standard input that it has not read yet."""
    return int.from_bytes(fcntl.ioctl(pipe.fileno(), termios.FIONREAD, b"\0\0\0\0"), sys.byteorder)


class Listener:
    """A broker that takes the TCP connection and then says nothing, not even connection.start
    (fake_broker's scripts answer further). `reached` is set once a client's protocol header
    came in."""

    def __init__(self, script=None):
        self.reached = threading.Event()
        self.broker = fake_broker.FakeBroker(script or self.silent)
        self.url = f"amqp://guest:guest@127.0.0.1:{self.broker.port}"

    def silent(self, conn):
        fake_broker._read_exact(conn, 8)
        self.reached.set()
        fake_broker._hold(conn)


class Stop(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        require_warren_and_broker()

    def setUp(self):
        # Every queue this test makes, the layer's included, is named under this prefix.
        self.prefix = "stop-" + uuid.uuid4().hex[:8]
        self.connection = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", int(PORT)))
        self.channel = self.connection.channel()
        self.addCleanup(self.drop)

    def drop(self):
        out = subprocess.run([CTL, "-q", "list_queues", "name"], capture_output=True, text=True).stdout
        channel = self.connection.channel()
        for name in out.split():
            if name.startswith(self.prefix):
                channel.queue_delete(name)
        self.connection.close()

    def queue(self):
        q = unique(self.prefix)
        self.channel.queue_declare(q)
        return q

    def consumers(self, q):
        return self.channel.queue_declare(q, passive=True).method.consumer_count

    def depth(self, q):
        return self.channel.queue_declare(q, passive=True).method.message_count

    def stop_at(self, args, ready, sig, status, lines, stdin_bytes=None, out_lines=None):
        """Starts `warren ARGS`, waits until ready(process, stdout path) holds, sends `sig`, and
        checks the stop: within STOP_WITHIN_S, `status` (a negative number: death by that
        signal), stderr's lines exactly `lines` (beside the metrics address and perf's progress;
        None: the caller reads stderr), and nothing of it left running."""
        mark = "warren-stop-" + uuid.uuid4().hex
        files = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, files)
        out_path, err_path = os.path.join(files, "out"), os.path.join(files, "err")
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            # Files, not pipes: nothing of this test's reading decides when warren ends, and
            # standard input stays open (no end of input) until warren is gone.
            p = subprocess.Popen([WARREN, *args], stdin=subprocess.PIPE, stdout=out, stderr=err,
                                 env={**os.environ, "WARREN_STOP_MARK": mark})
        try:
            if stdin_bytes:
                p.stdin.write(stdin_bytes)
                p.stdin.flush()
            deadline = time.monotonic() + 20
            while not ready(p, out_path):
                self.assertIsNone(p.poll(), f"{args[:2]} ended before its phase: {read(err_path)!r}")
                self.assertLess(time.monotonic(), deadline, f"{args[:2]} never reached its phase")
                time.sleep(0.02)
            sent = time.monotonic()
            p.send_signal(sig)
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
            took = time.monotonic() - sent
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
            p.stdin.close()
        err = read(err_path)
        self.assertLess(took, STOP_WITHIN_S, f"{args[:2]} took {took:.1f} s to stop: {err!r}")
        self.assertEqual(p.returncode, status, err)
        # Beside what a stop prints: where the metrics are, and perf's progress each second.
        if lines is not None:  # None: the caller reads stderr itself
            got = [line for line in err.splitlines() if not line.startswith(("warren: metrics at ", "time: "))]
            self.assertEqual(got, lines, err)
        if out_lines is not None:
            self.assertEqual(read(out_path).splitlines(), out_lines)
        for _ in range(50):  # a command warren ended may take a moment to be reaped by init
            left = processes_marked(mark)
            if not left:
                break
            time.sleep(0.02)
        self.assertEqual(left, [], f"{args[:2]} left processes behind")
        return err

    # ---- the commands, and what a stop says for each

    def commands(self, url):
        """(name, args, is_a_worker, reads_stdin) for every command that runs longer than a call."""
        q, p = self.queue(), self.prefix
        return [
            ("work put", ["work", "put", "--queue", unique("w"), "--prefix", p, "--url", url], False, True),
            ("log append", ["log", "append", "--log", unique("l"), "--prefix", p, "--url", url], False, True),
            ("publish", ["publish", "--routing-key", q, "--confirm", "--url", url], False, True),
            ("consume", ["consume", "--queue", q, "--url", url], False, False),
            ("log read", ["log", "read", "--log", unique("l"), "--prefix", p, "--follow", "--url", url], False, False),
            ("rpc serve", ["rpc", "serve", "--queue", q, "--url", url], False, False),
            ("perf", ["perf", "-x", "1", "-y", "1", "-z", "60", "-u", q, "--url", url], False, False),
            ("work run", ["work", "run", "--queue", unique("w"), "--prefix", p, "--exec", "cat", "--url", url], True, False),
            ("pipe", ["pipe", "--from", q, "--to", "", "--exec", "cat", "--on-error", "skip", "--url", url], True, False),
        ]

    @staticmethod
    def stopped(sig, reads_stdin, read=0, unconfirmed=0):
        line = f"warren: stopped by {sig.name}"
        return [line + f": {read} line(s) read, {unconfirmed} not confirmed" if reads_stdin else line]

    def test_while_dialling_a_broker_that_never_answers(self):
        # Its metrics endpoint is up too: it must not hold the exit either.
        for sig, driver in SIGNALS:
            listener = Listener()
            self.addCleanup(listener.broker.close)
            for name, args, worker, reads_stdin in self.commands(listener.url):
                with self.subTest(command=name, signal=sig.name):
                    listener.reached.clear()
                    err = self.stop_at(args + ["--driver", driver, "--metrics-listen", "127.0.0.1:0"],
                                       lambda p, out: listener.reached.is_set(), sig,
                                       0 if worker else -sig, [] if worker else self.stopped(sig, reads_stdin))
                    self.assertRegex(err.splitlines()[0], r"^warren: metrics at http://127\.0\.0\.1:\d+/metrics$", err)

    def test_under_json_the_stop_line_is_a_record(self):
        listener = Listener()
        self.addCleanup(listener.broker.close)
        err = self.stop_at(["work", "put", "--queue", "w", "--prefix", self.prefix, "--log-format", "json",
                            "--url", listener.url], lambda p, out: listener.reached.is_set(), signal.SIGTERM,
                           -signal.SIGTERM, None)
        record = json.loads(err)  # one record, nothing else
        self.assertEqual((record["event"], record["level"], record["cause"]),
                         ("command.stopped", "warning", "stopped by SIGTERM: 0 line(s) read, 0 not confirmed"))

    def test_while_waiting_on_standard_input_after_its_lines_were_confirmed(self):
        for sig, driver in SIGNALS:
            for name, args, worker, reads_stdin in self.commands(URL):
                if not reads_stdin:
                    continue
                with self.subTest(command=name, signal=sig.name):
                    if name == "work put":
                        done = lambda p, out, q=f"{self.prefix}.{args[3]}": self.depth_is(q, 2)  # noqa: E731
                    elif name == "log append":
                        done = lambda p, out: len(read(out).splitlines()) == 2  # noqa: E731
                    else:
                        done = lambda p, out, q=args[2]: self.depth_is(q, 2)  # noqa: E731
                    self.stop_at(args + ["--driver", driver],
                                 lambda p, out, done=done: done(p, out) and unread(p.stdin) == 0 and waiting_on_stdin(p.pid),
                                 sig, -sig, self.stopped(sig, True, read=2), stdin_bytes=b"a\nb\n")

    def depth_is(self, q, n):
        try:
            return self.depth(q) == n
        except pika.exceptions.ChannelClosedByBroker:  # not declared yet
            self.channel = self.connection.channel()
            return False

    def test_lines_read_and_never_confirmed_are_said(self):
        # The broker took the channel and answers nothing more (confirm.select hangs): the lines
        # read are not lost in silence.
        for sig, driver in SIGNALS:
            listener = Listener(fake_broker.silent_after_open)
            self.addCleanup(listener.broker.close)
            with self.subTest(signal=sig.name):
                self.stop_at(["publish", "--routing-key", "q", "--confirm", "--url", listener.url, "--driver", driver],
                             lambda p, out: unread(p.stdin) == 0 and waiting_on_stdin(p.pid), sig, -sig,
                             self.stopped(sig, True, read=3, unconfirmed=3), stdin_bytes=b"a\nb\nc\n")

    def test_once_it_works(self):
        for sig, driver in SIGNALS:
            for name, args, worker, reads_stdin in self.commands(URL):
                if reads_stdin:
                    continue  # their working phase is the one above: waiting on their input
                with self.subTest(command=name, signal=sig.name):
                    extra, out_lines = [], None
                    if name == "rpc serve":
                        ready = lambda p, out, q=args[3]: read(out) == f"serving {q}\n"  # noqa: E731
                    elif name == "log read":
                        # Caught up (its one entry printed), it follows.
                        appended = warren("log", "append", "--log", args[3], "--prefix", self.prefix, stdin=b"a\n")
                        self.assertEqual(appended.stdout, b"0\n", appended.stderr)
                        ready = lambda p, out: read(out) == "0\ta\n"  # noqa: E731
                    elif name == "work run":
                        # A command runs: it gets SIGTERM with its process group and is gone
                        # before warren exits; its message goes back (no result line).
                        q = f"{self.prefix}.{args[3]}"
                        self.assertEqual(warren("work", "put", "--queue", args[3], "--prefix", self.prefix, "--body", "x").returncode, 0)
                        extra, out_lines = ["--exec", "sleep 30"], []
                        ready = lambda p, out: self.children(p) != []  # noqa: E731
                    elif name == "perf":
                        ready = lambda p, out, q=args[8]: self.consumers_are(q, 1)  # noqa: E731
                    else:
                        ready = lambda p, out, q=args[args.index("--queue" if name == "consume" else "--from") + 1]: \
                            self.consumers_are(q, 1)  # noqa: E731
                    if extra:
                        args = args[:args.index("--exec")] + args[args.index("--exec") + 2:]
                    self.stop_at(args + extra + ["--driver", driver], ready, sig, 0 if worker else -sig,
                                 [] if worker else self.stopped(sig, False), out_lines=out_lines)
                    if name == "work run":
                        # The broker requeues a closed channel's unacked message in the queue's
                        # own process, after the connection's close-ok: give it a moment.
                        deadline = time.monotonic() + 5
                        while self.depth(q) != 1 and time.monotonic() < deadline:
                            time.sleep(0.05)
                        self.assertEqual(self.depth(q), 1, "the message in flight went back")

    def consumers_are(self, q, n):
        try:
            return self.consumers(q) == n
        except pika.exceptions.ChannelClosedByBroker:
            self.channel = self.connection.channel()
            return False

    @staticmethod
    def children(p):
        """The commands warren started (direct children of its process)."""
        out = subprocess.run(["pgrep", "-P", str(p.pid)], capture_output=True, text=True).stdout
        return [int(pid) for pid in out.split()]


if __name__ == "__main__":
    unittest.main()
