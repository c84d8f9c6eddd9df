"""`warren work put` and `warren work run` against the real test broker (RMQ_PORT, RMQ_CTL):
the result lines and exit codes the issue fixes, on both drivers: done, a failing command
retried through the backoff and dead-lettered after --attempts (with its headers, read back
with pika), exit 75 releasing without counting an attempt, the environment the command sees,
no message lost when workers are killed with SIGKILL mid-run (at random moments, and across
the retry's republish, confirm and ack), and the usage errors."""
import os
import random
import signal
import subprocess
import time
import sys
import unittest
import uuid

import pika

sys.path.insert(0, os.path.dirname(__file__))
from cli_env import WARREN, PORT, CTL, URL, require_warren_and_broker, warren  # noqa: E402
FAST = ["--backoff-base-ms", "100", "--backoff-max-ms", "200"]


class Work(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        require_warren_and_broker()

    def setUp(self):
        self.prefix = "cliwork-" + uuid.uuid4().hex[:8]
        self.connection = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", int(PORT)))
        self.channel = self.connection.channel()
        self.addCleanup(self.drop)

    def drop(self):
        out = subprocess.run([CTL, "-q", "list_queues", "name"], capture_output=True, text=True).stdout
        for name in out.split():
            if name.startswith(self.prefix + "."):
                self.channel.queue_delete(name)
        self.connection.close()

    def ok(self, result):
        self.assertEqual(result.returncode, 0, result.stderr.decode(errors="replace"))
        return result.stdout.decode()

    def depth(self, queue):
        return self.channel.queue_declare(queue, passive=True).method.message_count

    def consumers(self, queue):
        # From the broker's list of consumers: a quorum queue's declare-ok and its list_queues
        # count do not say when one was cancelled.
        out = subprocess.run([CTL, "-q", "list_consumers", "queue_name"], capture_output=True, text=True).stdout
        return out.split().count(queue)

    def lines(self, out):
        # "done <id> attempt=<n>" → ("done", "attempt=<n>"); the id is a fresh UUID per message
        return [(w[0], w[2]) for w in (line.split(" ") for line in out.splitlines())]

    def test_done_prints_one_line_per_message_and_empties_the_queue(self):
        for driver in ("uv", "asio"):
            with self.subTest(driver=driver):
                q = "jobs-" + driver
                self.ok(warren("work", "put", "--queue", q, "--prefix", self.prefix, "--driver", driver, stdin=b"a\nb\nc\n"))
                self.assertEqual(self.depth(f"{self.prefix}.{q}"), 3)
                out = self.ok(warren("work", "run", "--queue", q, "--prefix", self.prefix, "--driver", driver,
                                     "--exec", "cat >/dev/null", "--count", "3", "--timeout", "20"))
                self.assertEqual(self.lines(out), [("done", "attempt=1")] * 3)
                ids = [line.split(" ")[1] for line in out.splitlines()]
                self.assertEqual(len(set(ids)), 3)
                for i in ids:
                    uuid.UUID(i)  # a fresh UUID per message
                self.assertEqual(self.depth(f"{self.prefix}.{q}"), 0)

    def test_a_failing_command_is_retried_then_dead_lettered_with_why(self):
        for driver in ("uv", "asio"):
            with self.subTest(driver=driver):
                q = "fail-" + driver
                self.ok(warren("work", "put", "--queue", q, "--prefix", self.prefix, "--body", "payload",
                               "--header", "origin=test", "--driver", driver))
                out = self.ok(warren("work", "run", "--queue", q, "--prefix", self.prefix, "--driver", driver,
                                     "--exec", "echo first >&2; echo it broke >&2; exit 3", "--attempts", "2", *FAST,
                                     "--count", "1", "--timeout", "20"))
                self.assertEqual(self.lines(out), [("retry", "attempt=1"), ("dead-letter", "attempt=2")])
                method, props, body = self.channel.basic_get(f"{self.prefix}.{q}.dlq", auto_ack=True)
                self.assertIsNotNone(method)
                self.assertEqual(body, b"payload")
                h = props.headers
                self.assertEqual(h["x-warren-exit-status"], 3)
                self.assertEqual(h["x-warren-error"], b"it broke" if isinstance(h["x-warren-error"], bytes) else "it broke")
                self.assertEqual(h["x-warren-attempts"], 2)
                self.assertEqual(h["x-warren-original-routing-key"], f"{self.prefix}.{q}")
                self.assertEqual(h["origin"], "test")
                self.assertEqual(props.message_id, out.splitlines()[0].split(" ")[1])
                self.assertEqual(self.depth(f"{self.prefix}.{q}"), 0)

    def test_a_run_that_times_out_kills_its_command_and_leaves_the_message(self):
        # A command far longer than --timeout: the run must end at its timeout (exit 1, one
        # warren: line), not wait for the command, and the unfinished message stays queued.
        q = "slow"
        self.ok(warren("work", "put", "--queue", q, "--prefix", self.prefix, "--body", "x"))
        started = time.monotonic()
        result = warren("work", "run", "--queue", q, "--prefix", self.prefix, "--exec", "sleep 600",
                        "--timeout", "2", timeout=60)
        elapsed = time.monotonic() - started
        self.assertEqual(result.returncode, 1, result.stderr.decode(errors="replace"))
        self.assertTrue(result.stderr.decode().startswith("warren: "), result.stderr)
        self.assertLess(elapsed, 30, "the run waited for its command past --timeout")
        for _ in range(50):
            if self.depth(f"{self.prefix}.{q}") == 1:
                break
            time.sleep(0.1)
        self.assertEqual(self.depth(f"{self.prefix}.{q}"), 1)
        leftover = subprocess.run(["pgrep", "-f", "^sleep 600$"], capture_output=True, text=True).stdout
        self.assertEqual(leftover, "", "the command outlived the run")

    def test_a_put_the_broker_nacks_is_put_again_until_it_is_taken(self):
        # Issue 39's soak: a quorum queue without a leader nacks a put, and `work put` exited 1.
        # A nack says the broker did not take the message, so nothing can be lost by putting it
        # again. A full queue that rejects publishes shows the same nack on one node: room for
        # one, past it with two; three more puts wait, put again, until a worker makes room.
        for driver in ("uv", "asio"):
            with self.subTest(driver=driver):
                q = "full-" + driver
                name = f"{self.prefix}.{q}"
                policy = f"{self.prefix}-cap-{driver}"
                r = subprocess.run([CTL, "-q", "set_policy", "--apply-to", "queues", policy, f"^{name}$",
                                    '{"max-length":1,"overflow":"reject-publish"}'], capture_output=True, text=True)
                self.assertEqual(r.returncode, 0, r.stderr)
                self.addCleanup(lambda p=policy: subprocess.run([CTL, "-q", "clear_policy", p], capture_output=True))
                # A quorum queue rejects once it is past its limit, not at it: two fill it.
                self.ok(warren("work", "put", "--queue", q, "--prefix", self.prefix, "--driver", driver,
                               stdin=b"first\nsecond\n"))
                put = subprocess.Popen([WARREN, "work", "put", "--queue", q, "--prefix", self.prefix, "--driver", driver,
                                        "--url", URL], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                       stderr=subprocess.PIPE)
                self.addCleanup(lambda p=put: p.poll() is None and p.kill())
                put.stdin.write(b"a\nb\nc\n")
                put.stdin.close()
                # Each is nacked while the queue is full: the put goes on, and says so once.
                time.sleep(2)
                self.assertIsNone(put.poll(), put.stderr.read().decode(errors="replace") if put.poll() is not None else "")
                self.assertEqual(self.depth(name), 2)
                out = self.ok(warren("work", "run", "--queue", q, "--prefix", self.prefix, "--driver", driver,
                                     "--exec", "cat", "--count", "5", "--timeout", "30"))
                self.assertEqual(self.lines(out), [("done", "attempt=1")] * 5)
                put.wait(timeout=30)
                err = put.stderr.read().decode(errors="replace")
                self.assertEqual(put.returncode, 0, err)
                said = err.splitlines()
                self.assertEqual(len(said), 1, err)
                self.assertRegex(said[0], rf"^warren: work put {name}: .*nack.*; putting it again")
                self.assertNotIn("twice", said[0], "a nacked put is not in the queue: it cannot be there twice")
                self.assertEqual(self.depth(name), 0)

    def test_a_stop_signal_ends_the_command_hands_its_message_back_and_exits_0(self):
        # F3: a worker stopped by its service manager. Consuming stops, the running command's
        # process group gets SIGTERM, its message goes back unsettled (no result line), and
        # warren exits 0; the command does not outlive it.
        for sig, driver in ((signal.SIGTERM, "uv"), (signal.SIGINT, "asio")):
            with self.subTest(signal=sig.name, driver=driver):
                q = "stop-" + driver
                self.ok(warren("work", "put", "--queue", q, "--prefix", self.prefix, "--driver", driver, "--body", "x"))
                pid_file = f"/tmp/{self.prefix}.{driver}.pid"
                self.addCleanup(lambda f=pid_file: os.path.exists(f) and os.remove(f))
                run = subprocess.Popen([WARREN, "work", "run", "--queue", q, "--prefix", self.prefix, "--driver", driver,
                                        "--exec", f"echo $$ > {pid_file}.tmp && mv {pid_file}.tmp {pid_file} && exec sleep 300",
                                        "--url", URL], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                deadline = time.monotonic() + 20
                while not os.path.exists(pid_file) and time.monotonic() < deadline:
                    time.sleep(0.05)
                self.assertTrue(os.path.exists(pid_file), "the command never started")
                with open(pid_file) as f:
                    command = int(f.read())
                stopped = time.monotonic()
                run.send_signal(sig)
                out, err = run.communicate(timeout=30)
                self.assertEqual(run.returncode, 0, err.decode(errors="replace"))
                self.assertLess(time.monotonic() - stopped, 8, "the stop waited past the command's SIGTERM")
                self.assertEqual(out, b"", "a message in flight at the stop is handed back, not settled")
                for _ in range(50):  # reaped by warren before it exits, or by init just after
                    if not os.path.exists(f"/proc/{command}") or " Z " in open(f"/proc/{command}/stat").read():
                        break
                    time.sleep(0.1)
                self.assertFalse(os.path.exists(f"/proc/{command}") and " Z " not in open(f"/proc/{command}/stat").read(),
                                 "the command outlived warren")
                for _ in range(50):
                    if self.depth(f"{self.prefix}.{q}") == 1:
                        break
                    time.sleep(0.1)
                self.assertEqual(self.depth(f"{self.prefix}.{q}"), 1, "the message went back to the queue")

    def wait_for(self, condition, what, seconds=20):
        deadline = time.monotonic() + seconds
        while not condition():
            self.assertLess(time.monotonic(), deadline, what)
            time.sleep(0.02)

    def test_a_stop_lets_the_running_command_end_before_its_message_goes_to_another_worker(self):
        # Two workers on one queue; A runs the item, whose command takes half a second to end
        # after SIGTERM and fails. The item is handed back only once A's command has ended, so
        # B runs it after, never beside it; a failure during a stop counts no attempt.
        q = "handover"
        self.ok(warren("work", "put", "--queue", q, "--prefix", self.prefix, "--body", "x"))
        log = f"/tmp/{self.prefix}.handover"
        self.addCleanup(lambda: os.path.exists(log) and os.remove(log))
        slow = f"echo 'A start' >> {log}; trap 'sleep 0.5; echo \"A end\" >> {log}; exit 3' TERM; while :; do sleep 0.05; done"
        a = subprocess.Popen([WARREN, "work", "run", "--queue", q, "--prefix", self.prefix, "--exec", slow, "--url", URL],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.addCleanup(lambda: a.poll() is None and a.kill())
        self.wait_for(lambda: os.path.exists(log), "A never started the item")
        b = subprocess.Popen([WARREN, "work", "run", "--queue", q, "--prefix", self.prefix, "--exec",
                              f"echo 'B start' >> {log}; echo 'B end' >> {log}", "--count", "1", "--timeout", "20",
                              "--url", URL], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.addCleanup(lambda: b.poll() is None and b.kill())
        self.wait_for(lambda: self.channel.queue_declare(f"{self.prefix}.{q}", passive=True).method.consumer_count == 2,
                      "B never consumed")
        a.send_signal(signal.SIGTERM)
        out_a, err_a = a.communicate(timeout=20)
        out_b, err_b = b.communicate(timeout=30)
        self.assertEqual((a.returncode, out_a), (0, b""), err_a)
        self.assertEqual(b.returncode, 0, err_b)
        with open(log) as f:
            self.assertEqual(f.read().splitlines(), ["A start", "A end", "B start", "B end"])
        self.assertEqual(self.lines(out_b.decode()), [("done", "attempt=1")])

    def test_a_stopping_worker_takes_nothing_new(self):
        # A is stopping (its command traps TERM and ends only once the test says B is done, or
        # after 9 s, within the worker's 10 s grace) with a prefetch slot free: an item put
        # meanwhile is not delivered to it to sit there until it leaves, but waits in the queue
        # for B, which runs it while A's command still ends. Were it delivered to A, B would get
        # nothing and time out. (A's end waited a fixed 4 s before: on a loaded CI machine the
        # wait for A's cancel and B's start took longer, and the test failed on the baseline
        # build too.)
        q = "stopping"
        self.ok(warren("work", "put", "--queue", q, "--prefix", self.prefix, "--body", "first"))
        log = f"/tmp/{self.prefix}.stopping"
        release = f"{log}.release"
        for path in (log, release):
            self.addCleanup(lambda path=path: os.path.exists(path) and os.remove(path))
        slow = (f"echo 'A start' >> {log}; trap 'i=0; while [ ! -e {release} ] && [ $i -lt 45 ]; do sleep 0.2; "
                f"i=$((i+1)); done; echo \"A end\" >> {log}; exit 0' TERM; while :; do sleep 0.05; done")
        a = subprocess.Popen([WARREN, "work", "run", "--queue", q, "--prefix", self.prefix, "--prefetch", "2", "--exec", slow,
                              "--url", URL], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.addCleanup(lambda: a.poll() is None and a.kill())
        self.wait_for(lambda: os.path.exists(log), "A never started the first item")
        a.send_signal(signal.SIGTERM)
        self.wait_for(lambda: self.consumers(f"{self.prefix}.{q}") == 0, "A still consumes after the stop")
        self.ok(warren("work", "put", "--queue", q, "--prefix", self.prefix, "--body", "second"))
        b = subprocess.Popen([WARREN, "work", "run", "--queue", q, "--prefix", self.prefix, "--exec",
                              f"echo \"B $(cat)\" >> {log}", "--count", "1", "--timeout", "20", "--url", URL],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.addCleanup(lambda: b.poll() is None and b.kill())
        out_b, err_b = b.communicate(timeout=30)
        open(release, "w").close()
        out_a, err_a = a.communicate(timeout=30)
        self.assertEqual((b.returncode, a.returncode), (0, 0), err_a + err_b)
        with open(log) as f:
            self.assertEqual(f.read().splitlines(), ["A start", "B second", "A end"])
        self.assertEqual(self.lines(out_a.decode()), [("done", "attempt=1")])

    def test_a_command_that_ends_well_on_sigterm_is_done(self):
        # A command that traps TERM, finishes its work and exits 0 did its work: acked, its
        # line printed, nothing back in the queue.
        q = "graceful"
        self.ok(warren("work", "put", "--queue", q, "--prefix", self.prefix, "--body", "x"))
        started = f"/tmp/{self.prefix}.graceful"
        self.addCleanup(lambda: os.path.exists(started) and os.remove(started))
        run = subprocess.Popen([WARREN, "work", "run", "--queue", q, "--prefix", self.prefix, "--exec",
                                f"trap 'exit 0' TERM; touch {started}; while :; do sleep 0.05; done", "--url", URL],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.addCleanup(lambda: run.poll() is None and run.kill())
        self.wait_for(lambda: os.path.exists(started), "the command never started")
        run.send_signal(signal.SIGTERM)
        out, err = run.communicate(timeout=20)
        self.assertEqual(run.returncode, 0, err)
        self.assertEqual(self.lines(out.decode()), [("done", "attempt=1")])
        self.assertEqual(self.depth(f"{self.prefix}.{q}"), 0)

    def test_the_outcome_is_the_commands_exit_not_the_end_of_what_it_left_behind(self):
        # F7: a command that exits 0 at once but leaves a child holding its output is done at
        # once; the child is left alone (never waited on).
        q = "leftover"
        self.ok(warren("work", "put", "--queue", q, "--prefix", self.prefix, "--body", "x"))
        started = time.monotonic()
        self.addCleanup(lambda: subprocess.run(["pkill", "-f", "^sleep 41.5$"]))
        with open(os.devnull, "wb") as devnull:  # the child holds warren's stderr: not a pipe of ours
            run = subprocess.Popen([WARREN, "work", "run", "--queue", q, "--prefix", self.prefix, "--exec",
                                    "sleep 41.5 & exit 0", "--count", "1", "--timeout", "30", "--url", URL],
                                   stdout=subprocess.PIPE, stderr=devnull)
            out = run.stdout.read().decode()
            self.assertEqual(run.wait(timeout=60), 0)
        self.assertLess(time.monotonic() - started, 10, "the run waited for the child the command left behind")
        self.assertEqual(self.lines(out), [("done", "attempt=1")])
        subprocess.run(["pkill", "-f", "^sleep 41.5$"])
        # A child in a session of its own is beyond the group: ignored, and the timeout holds.
        self.ok(warren("work", "put", "--queue", q, "--prefix", self.prefix, "--body", "y"))
        self.addCleanup(lambda: subprocess.run(["pkill", "-f", "^sleep 42.5$"]))
        started = time.monotonic()
        # warren's own output to files: the setsid child holds warren's standard error (the
        # command's output goes there), and a pipe would keep this test, not warren, waiting.
        with open(os.devnull, "wb") as devnull:
            run = subprocess.Popen([WARREN, "work", "run", "--queue", q, "--prefix", self.prefix, "--exec",
                                    "setsid sleep 42.5 & sleep 600", "--timeout", "3", "--url", URL],
                                   stdout=devnull, stderr=devnull)
            self.assertEqual(run.wait(timeout=60), 1)
        self.assertLess(time.monotonic() - started, 10, "the timeout waited for a setsid child's pipes")

    def test_a_child_left_behind_that_keeps_writing_does_not_hold_the_item(self):
        # The shell exits 0 while its child still writes to the standard error they share, as
        # fast as it can: what was buffered when the shell exited is read, then no more, so the
        # item is done at once (before, the drain read on for as long as the child wrote).
        q = "writer"
        self.ok(warren("work", "put", "--queue", q, "--prefix", self.prefix, "--body", "x"))
        marker = "writer-" + uuid.uuid4().hex[:8]
        self.addCleanup(lambda: subprocess.run(["pkill", "-f", f"^yes {marker}$"]))
        started = time.monotonic()
        r = warren("work", "run", "--queue", q, "--prefix", self.prefix, "--exec",
                   f"cat >/dev/null; (yes {marker} >&2) & sleep 0.2; exit 0", "--count", "1", "--timeout", "10")
        self.assertEqual(r.returncode, 0, r.stderr[-300:].decode(errors="replace"))
        self.assertEqual(self.lines(r.stdout.decode()), [("done", "attempt=1")])
        self.assertLess(time.monotonic() - started, 5, "the item waited for the child's output to end")

    def test_a_message_from_another_user_is_retried_and_dead_lettered_without_its_user_id(self):
        # F2: a message another user published with its own user_id. Its retry and dead-letter
        # copies are published by the worker's connection, which RabbitMQ lets carry only its
        # own user_id (else 406, closing the channel): they carry none, the DLQ copy names it.
        user, password = "cliwork-user-" + uuid.uuid4().hex[:8], uuid.uuid4().hex
        subprocess.run([CTL, "-q", "add_user", user, password], check=True, capture_output=True)
        self.addCleanup(lambda: subprocess.run([CTL, "-q", "delete_user", user], capture_output=True))
        subprocess.run([CTL, "-q", "set_permissions", "-p", "/", user, ".*", ".*", ".*"], check=True, capture_output=True)
        for driver in ("uv", "asio"):
            with self.subTest(driver=driver):
                q = "other-user-" + driver
                self.ok(warren("work", "put", "--queue", q, "--prefix", self.prefix, "--driver", driver, "--body", "mine"))
                with pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", int(PORT), "/",
                                                                       pika.PlainCredentials(user, password))) as c:
                    ch = c.channel()
                    ch.confirm_delivery()
                    ch.basic_publish("", f"{self.prefix}.{q}", b"theirs",
                                     pika.BasicProperties(user_id=user, message_id="m-theirs", delivery_mode=2,
                                                          headers={"x-warren-attempt": 1}), mandatory=True)
                out = self.ok(warren("work", "run", "--queue", q, "--prefix", self.prefix, "--driver", driver,
                                     "--exec", "exit 3", "--attempts", "2", *FAST, "--count", "2", "--timeout", "30"))
                self.assertEqual(sorted(self.lines(out)), sorted([("retry", "attempt=1"), ("dead-letter", "attempt=2")] * 2))
                dead = {}
                while (got := self.channel.basic_get(f"{self.prefix}.{q}.dlq", auto_ack=True))[0] is not None:
                    dead[got[2]] = got[1]
                self.assertEqual(sorted(dead), [b"mine", b"theirs"])
                self.assertIsNone(dead[b"theirs"].user_id)
                self.assertEqual(dead[b"theirs"].headers["x-warren-original-user-id"], user)
                self.assertNotIn("x-warren-original-user-id", dead[b"mine"].headers)

    def test_exit_75_releases_without_counting_an_attempt(self):
        q = "release"
        self.ok(warren("work", "put", "--queue", q, "--prefix", self.prefix, "--body", "x"))
        # The first run releases; the marker file makes the second run succeed.
        marker = f"/tmp/{self.prefix}.released"
        self.addCleanup(lambda: os.path.exists(marker) and os.remove(marker))
        cmd = f'if [ -e {marker} ]; then exit 0; fi; touch {marker}; exit 75'
        out = self.ok(warren("work", "run", "--queue", q, "--prefix", self.prefix, "--exec", cmd, "--attempts", "1",
                             "--count", "1", "--timeout", "20"))
        self.assertEqual(self.lines(out), [("release", "attempt=1"), ("done", "attempt=1")])

    def test_the_command_sees_the_body_attempt_and_message_id(self):
        q = "env"
        self.ok(warren("work", "put", "--queue", q, "--prefix", self.prefix, "--body", "the body"))
        out_file = f"/tmp/{self.prefix}.env"
        self.addCleanup(lambda: os.path.exists(out_file) and os.remove(out_file))
        cmd = f'{{ cat; echo; echo "$WARREN_ATTEMPT $WARREN_MESSAGE_ID"; }} >> {out_file}; [ "$WARREN_ATTEMPT" = 2 ]'
        out = self.ok(warren("work", "run", "--queue", q, "--prefix", self.prefix, "--exec", cmd, *FAST,
                             "--count", "1", "--timeout", "20"))
        self.assertEqual(self.lines(out), [("retry", "attempt=1"), ("done", "attempt=2")])
        message_id = out.splitlines()[0].split(" ")[1]
        with open(out_file) as f:
            self.assertEqual(f.read(), f"the body\n1 {message_id}\nthe body\n2 {message_id}\n")

    def put_traced(self, q, tracestate):
        """Publishes "traced" to work queue q with a W3C traceparent and tracestate, as a traced
        producer of another client would; returns the traceparent."""
        parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        self.channel.confirm_delivery()
        self.channel.basic_publish("", f"{self.prefix}.{q}", b"traced",
                                   pika.BasicProperties(message_id="m-traced", delivery_mode=2,
                                                        headers={"traceparent": parent, "tracestate": tracestate}),
                                   mandatory=True)
        return parent

    def test_the_command_runs_in_a_span_under_the_items_trace_context(self):
        # Issue 24: TRACEPARENT (a child of the item's context: the same trace, a new span) and
        # TRACESTATE in the command's environment, the carrier convention for processes.
        q = "trace"
        self.ok(warren("work", "put", "--queue", q, "--prefix", self.prefix, "--body", "declares the queue"))
        parent = self.put_traced(q, "congo=t61rcWkgMzE")
        out_file = f"/tmp/{self.prefix}.trace"
        self.addCleanup(lambda: os.path.exists(out_file) and os.remove(out_file))
        cmd = f'echo "$(cat) ${{TRACEPARENT:-none}} ${{TRACESTATE:-none}}" >> {out_file}'
        self.ok(warren("work", "run", "--queue", q, "--prefix", self.prefix, "--exec", cmd, "--count", "2", "--timeout", "20"))
        with open(out_file) as f:
            lines = sorted(f.read().splitlines())
        self.assertEqual(lines[0], "declares the queue none none")
        body, traceparent, tracestate = lines[1].split(" ")
        self.assertEqual((body, tracestate), ("traced", "congo=t61rcWkgMzE"))
        self.assertRegex(traceparent, r"^00-4bf92f3577b34da6a3ce929d0e0e4736-[0-9a-f]{16}-01$")
        self.assertNotEqual(traceparent, parent, "a span of its own, not the producer's")

    def test_a_retried_then_dead_lettered_item_keeps_its_trace_context(self):
        q = "trace-dlq"
        self.ok(warren("work", "put", "--queue", q, "--prefix", self.prefix, "--body", "untraced"))
        self.channel.queue_purge(f"{self.prefix}.{q}")
        parent = self.put_traced(q, "k=v")
        out = self.ok(warren("work", "run", "--queue", q, "--prefix", self.prefix, "--exec", "exit 3", "--attempts", "2",
                             *FAST, "--count", "1", "--timeout", "30"))
        self.assertEqual(self.lines(out), [("retry", "attempt=1"), ("dead-letter", "attempt=2")])
        method, props, body = self.channel.basic_get(f"{self.prefix}.{q}.dlq", auto_ack=True)
        self.assertEqual(body, b"traced")
        text = lambda v: v.decode() if isinstance(v, bytes) else v  # noqa: E731
        self.assertEqual((text(props.headers["traceparent"]), text(props.headers["tracestate"])), (parent, "k=v"))

    def test_the_command_inherits_no_descriptor_but_its_standard_three(self):
        # Every descriptor warren opens (sockets, timers, pipes, on both drivers) is
        # close-on-exec: a command never holds warren's authenticated broker connection.
        for driver in ("uv", "asio"):
            with self.subTest(driver=driver):
                q = "fds-" + driver
                self.ok(warren("work", "put", "--queue", q, "--prefix", self.prefix, "--driver", driver, "--body", "x"))
                r = warren("work", "run", "--queue", q, "--prefix", self.prefix, "--driver", driver,
                           "--exec", "ls -l /proc/self/fd >&2", "--count", "1", "--timeout", "20")
                self.assertEqual(r.returncode, 0, r.stderr.decode(errors="replace"))
                listing = r.stderr.decode(errors="replace")
                # "lr-x------ 1 root root 64 ... 0 -> pipe:[123]": the descriptor number precedes "->"
                fds = sorted(int(line.split(" -> ")[0].split()[-1]) for line in listing.splitlines() if " -> " in line)
                # 0, 1, 2, and the descriptor ls itself holds on /proc/self/fd
                self.assertEqual(len(fds), 4, listing)
                self.assertEqual(fds[:3], [0, 1, 2], listing)
                self.assertNotIn("socket:", listing)

    def test_no_message_is_lost_when_work_run_is_killed_at_any_point(self):
        q = "crash"
        bodies = [f"m{i}" for i in range(12)]
        self.ok(warren("work", "put", "--queue", q, "--prefix", self.prefix, stdin="".join(b + "\n" for b in bodies).encode()))
        record = f"/tmp/{self.prefix}.done"
        self.addCleanup(lambda: os.path.exists(record) and os.remove(record))
        # Attempt 1 fails (a retry: republished, confirmed, then acked), attempt 2 records the
        # body and succeeds; a third of the bodies always fail and end in the DLQ.
        cmd = (f'b=$(cat); case "$b" in m0|m3|m6|m9) exit 4;; esac; '
               f'[ "$WARREN_ATTEMPT" -ge 2 ] || exit 3; echo "$b" >> {record}')
        run = [WARREN, "work", "run", "--queue", q, "--prefix", self.prefix, "--exec", cmd, "--attempts", "2",
               "--backoff-base-ms", "50", "--backoff-max-ms", "50", "--prefetch", "4", "--url", URL]
        # Kills at moments drawn over a worker's whole life (connecting, declaring, consuming,
        # mid-command, mid-retry); the seed is in every failure message (WARREN_TEST_SEED replays it).
        seed = int(os.environ.get("WARREN_TEST_SEED", str(int(time.time()))))
        rng = random.Random(seed)
        for delay in [rng.uniform(0.0, 0.6) for _ in range(12)]:
            p = subprocess.Popen(run, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(delay)
            p.send_signal(signal.SIGKILL)
            p.wait()
        # A last worker drains what is left (it times out once there is nothing more).
        r = subprocess.run([*run, "--timeout", "6"], capture_output=True, timeout=60)
        self.assertIn(r.returncode, (0, 1), r.stderr)
        with open(record) if os.path.exists(record) else open(os.devnull) as f:
            done = set(f.read().split())
        dead = set()
        while True:
            method, _, body = self.channel.basic_get(f"{self.prefix}.{q}.dlq", auto_ack=True)
            if method is None:
                break
            dead.add(body.decode())
        self.assertEqual(done | dead, set(bodies), f"seed {seed}")  # duplicates may happen; losses may not
        self.assertEqual(dead, {"m0", "m3", "m6", "m9"}, f"seed {seed}")
        self.assertEqual(self.depth(f"{self.prefix}.{q}"), 0)

    def test_no_message_is_lost_when_the_process_holding_a_retry_is_killed(self):
        # The retry is the delicate part: the failed message is republished to its retry level,
        # the broker confirms it, and only then is the original acked. Each round puts a fresh
        # message, and a worker's command fails its first attempt after starting a killer that
        # SIGKILLs the worker (the command's parent) a little later: 0 to 19 ms after the
        # command exited, in a shuffled order, so the kill lands before the republish, between
        # it and its confirm, between the confirm and the ack, and after. Whatever it hit, each
        # message is recorded by a later attempt, possibly twice, and nothing is left queued.
        q = "retrykill"
        record = f"/tmp/{self.prefix}.done"
        self.addCleanup(lambda: os.path.exists(record) and os.remove(record))
        seed = int(os.environ.get("WARREN_TEST_SEED", str(int(time.time()))))
        rng = random.Random(seed)
        delays_ms = list(range(20))
        rng.shuffle(delays_ms)
        base = [WARREN, "work", "run", "--queue", q, "--prefix", self.prefix, "--attempts", "3",
                "--backoff-base-ms", "50", "--backoff-max-ms", "50", "--prefetch", "1", "--url", URL]
        bodies = []
        for i, delay in enumerate(delays_ms):
            body = f"r{i}"
            bodies.append(body)
            self.ok(warren("work", "put", "--queue", q, "--prefix", self.prefix, "--body", body))
            cmd = (f'b=$(cat); if [ "$WARREN_ATTEMPT" -lt 2 ]; then '
                   f'(sleep {delay / 1000:.3f}; kill -9 $PPID) >/dev/null 2>&1 & exit 3; fi; echo "$b" >> {record}')
            p = subprocess.Popen([*base, "--exec", cmd], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                rc = p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
                self.fail(f"seed {seed}: round {i} ({delay} ms): the worker met no first attempt to fail")
            self.assertEqual(rc, -signal.SIGKILL, f"seed {seed}: round {i}")
        drain = subprocess.run([*base, "--exec", f'b=$(cat); echo "$b" >> {record}', "--timeout", "4"],
                               capture_output=True, timeout=60)
        self.assertIn(drain.returncode, (0, 1), drain.stderr)
        with open(record) if os.path.exists(record) else open(os.devnull) as f:
            done = f.read().split()
        self.assertEqual(set(done), set(bodies), f"seed {seed}: lost {sorted(set(bodies) - set(done))}")
        self.assertEqual(self.depth(f"{self.prefix}.{q}"), 0)
        self.assertEqual(self.depth(f"{self.prefix}.{q}.dlq"), 0, f"seed {seed}")
        out = subprocess.run([CTL, "-q", "list_queues", "name", "messages"], capture_output=True, text=True).stdout
        for line in out.splitlines():
            name, _, count = line.partition("\t")
            if name.startswith(f"{self.prefix}.{q}.retry"):
                self.assertEqual(count.strip(), "0", f"seed {seed}: {name} still holds messages")

    def test_an_ack_on_a_channel_the_broker_closed_does_not_end_the_run(self):
        # While the command runs, its queue is deleted and declared again with other arguments:
        # the broker cancels the consumer, and the layer's declare before it consumes again
        # gets 406, which closes the worker's channel. The command then exits 0: the ack has
        # no channel. The run goes on (the broker redelivers what was not settled) and, once
        # the queue is right again, handles the next message.
        q = "closed"
        queue = f"{self.prefix}.{q}"
        self.ok(warren("work", "put", "--queue", q, "--prefix", self.prefix, "--body", "first"))
        started, go = f"/tmp/{self.prefix}.started", f"/tmp/{self.prefix}.go"
        for f in (started, go):
            self.addCleanup(lambda f=f: os.path.exists(f) and os.remove(f))
        cmd = (f'b=$(cat); [ "$b" = first ] || exit 0; touch {started}; '
               f'while [ ! -e {go} ]; do sleep 0.05; done; exit 0')
        run = subprocess.Popen([WARREN, "work", "run", "--queue", q, "--prefix", self.prefix, "--exec", cmd,
                                "--count", "1", "--timeout", "30", "--url", URL],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            for _ in range(200):
                if os.path.exists(started):
                    break
                time.sleep(0.05)
            self.assertTrue(os.path.exists(started), "the command never started")
            self.channel.queue_delete(queue)
            self.channel.queue_declare(queue, durable=True)  # classic, no arguments: the layer's gets 406
            time.sleep(1.0)  # the layer's first resubscribe (within 100 ms) meets the 406
            open(go, "w").close()
            time.sleep(0.5)  # the command exits 0; the ack finds its channel gone
            self.assertIsNone(run.poll(), "the run ended at the failed ack")
            self.channel.queue_delete(queue)  # the layer's next try declares it as it should be
            self.ok(warren("work", "put", "--queue", q, "--prefix", self.prefix, "--body", "second"))
            out, err = run.communicate(timeout=40)
        finally:
            if run.poll() is None:
                run.kill()
                run.wait()
        self.assertEqual(run.returncode, 0, err.decode(errors="replace"))
        self.assertEqual(self.lines(out.decode()), [("done", "attempt=1")])
        self.assertIn("the broker redelivers it", err.decode())

    def test_the_backoff_factor_sets_the_delay_levels(self):
        q = "factor"
        self.ok(warren("work", "put", "--queue", q, "--prefix", self.prefix, "--body", "x"))
        r = warren("work", "run", "--queue", q, "--prefix", self.prefix, "--exec", "true", "--backoff-base-ms", "100",
                   "--backoff-max-ms", "1000", "--backoff-factor", "3", "--backoff-jitter", "none", "--count", "1",
                   "--timeout", "20")
        self.assertEqual(r.returncode, 0, r.stderr.decode(errors="replace"))
        listed = subprocess.run([CTL, "-q", "list_queues", "name"], capture_output=True, text=True, check=True).stdout
        levels = sorted(int(n.rsplit(".", 1)[1]) for n in listed.split() if n.startswith(f"{self.prefix}.{q}.retry."))
        # 100, 300, 900, 1000 from the run (`work put` declared the default levels, 1 s to 60 s); none
        # of factor 2's 200, 400 or 800.
        self.assertTrue({100, 300, 900, 1000} <= set(levels), levels)
        self.assertFalse({200, 400, 800} & set(levels), levels)

    def test_a_retry_level_that_cannot_be_declared_is_said_and_the_worker_goes_on(self):
        q = "levels"
        self.ok(warren("work", "put", "--queue", q, "--prefix", self.prefix, "--body", "x"))
        # A queue of the 100 ms level's name, declared otherwise (no TTL): the worker's declare is a 406.
        self.channel.queue_declare(f"{self.prefix}.{q}.retry.100", durable=True)
        r = warren("work", "run", "--queue", q, "--prefix", self.prefix, "--exec", "true", "--backoff-base-ms", "100",
                   "--backoff-max-ms", "100", "--count", "1", "--timeout", "20")
        self.assertEqual(r.returncode, 0, r.stderr.decode(errors="replace"))
        self.assertEqual(self.lines(r.stdout.decode()), [("done", "attempt=1")])
        self.assertIn(f"warren: retry levels of {self.prefix}.{q}: precondition failed (406)", r.stderr.decode())

    def test_a_retry_level_deleted_under_the_worker_is_declared_again_and_the_run_goes_on(self):
        for driver in ("uv", "asio"):
            with self.subTest(driver=driver):
                q = "gone-" + driver
                level = f"{self.prefix}.{q}.retry.100"
                self.ok(warren("work", "put", "--queue", q, "--prefix", self.prefix, "--body", "x"))
                mark = f"/tmp/{self.prefix}.{driver}.deleted"
                self.addCleanup(lambda m=mark: os.path.exists(m) and os.remove(m))
                # The first run of the command deletes the level the worker declared, as an
                # operator (or a lost node) would; attempt 1 fails, attempt 2 succeeds.
                cmd = (f'if [ ! -e {mark} ]; then touch {mark}; {CTL} -q delete_queue {level} >/dev/null; fi; '
                       '[ "$WARREN_ATTEMPT" -ge 2 ] || exit 3')
                r = warren("work", "run", "--queue", q, "--prefix", self.prefix, "--driver", driver, "--exec", cmd,
                           "--backoff-base-ms", "100", "--backoff-max-ms", "100", "--count", "1", "--timeout", "30")
                err = r.stderr.decode(errors="replace")
                # The previous binary exited 1 here ("retry <id>: unroutable ...").
                self.assertEqual(r.returncode, 0, err)
                # Attempt 1 is retried twice (the first came back unroutable), then done at attempt 2.
                self.assertEqual(self.lines(r.stdout.decode()), [("retry", "attempt=1"), ("done", "attempt=2")])
                said = err.splitlines()
                self.assertEqual(len(said), 1, err)
                self.assertRegex(said[0], r"^warren: retry \S+: .*unroutable.* \(it goes back to the queue\)$")
                self.assertEqual(self.depth(level), 0)  # declared again
                self.assertEqual(self.depth(f"{self.prefix}.{q}"), 0)

    def test_a_retry_held_back_for_its_delay_does_not_hold_the_exit(self):
        # Asio's timers keep its loop running: a message held back for a 30 s delay (its retry
        # came back unroutable) must go back to the queue at the run's end, not hold the exit.
        q = "held"
        level = f"{self.prefix}.{q}.retry.30000"
        self.ok(warren("work", "put", "--queue", q, "--prefix", self.prefix, "--body", "fails"))
        self.ok(warren("work", "put", "--queue", q, "--prefix", self.prefix, "--body", "works"))
        cmd = (f'b=$(cat); if [ "$b" = fails ]; then {CTL} -q delete_queue {level} >/dev/null; exit 3; fi; '
               'sleep 4')  # done once the other's retry came back and is held
        r = warren("work", "run", "--queue", q, "--prefix", self.prefix, "--driver", "asio", "--exec", cmd,
                   "--prefetch", "2", "--backoff-base-ms", "30000", "--backoff-max-ms", "30000", "--count", "1",
                   "--timeout", "60", timeout=20)  # the previous binary waited out the 30 s
        self.assertEqual(r.returncode, 0, r.stderr.decode(errors="replace"))
        self.assertEqual(self.lines(r.stdout.decode()), [("done", "attempt=1")])
        self.assertIn("(it goes back to the queue)", r.stderr.decode())
        method, _, body = self.channel.basic_get(f"{self.prefix}.{q}", auto_ack=True)
        self.assertIsNotNone(method, "the held message is back in the queue")
        self.assertEqual(body, b"fails")

    def test_timeout_and_usage_errors(self):
        r = warren("work", "run", "--queue", "idle", "--prefix", self.prefix, "--exec", "true", "--count", "1",
                   "--timeout", "1")
        self.assertEqual(r.returncode, 1)
        self.assertEqual(r.stderr.decode(),
                         f"warren: work run {self.prefix}.idle: timed out after 1 s with 0 message(s) of 1\n")
        r = warren("work", "run", "--queue", "x", "--exec", "true", "--attempts", "0")
        self.assertEqual(r.returncode, 2)
        self.assertEqual(r.stderr.decode(), "warren: invalid argument: --attempts must be at least 1\n")
        r = warren("work", "put", "--queue", "x", "--prefix", "bad prefix", "--body", "b")
        self.assertEqual(r.returncode, 2)
        self.assertTrue(r.stderr.decode().startswith("warren: invalid argument: --prefix "), r.stderr)
        r = warren("work", "run", "--queue", "x")
        self.assertEqual(r.returncode, 2)  # --exec is required
        # A delay level is a queue's x-message-ttl: at most 2^32 - 1 ms. A larger one overflowed
        # the doubling of the levels and ended in bad_alloc.
        r = warren("work", "run", "--queue", "x", "--exec", "true", "--backoff-factor", "1")
        self.assertEqual((r.returncode, r.stderr.decode()),
                         (2, "warren: invalid argument: --backoff-factor must be above 1 and at most 1000\n"))
        r = warren("work", "run", "--queue", "x", "--exec", "true", "--backoff-max-ms", "9223372036854775807")
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertEqual(r.stderr.decode(), "warren: invalid argument: --backoff-max-ms must be at most 4294967295 "
                                            "(a delay level is a queue's x-message-ttl)\n")


if __name__ == "__main__":
    unittest.main(verbosity=2)
