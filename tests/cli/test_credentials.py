"""Credentials off the command line (issue 41): the broker URL from --url, --url-file PATH or
WARREN_URL, in that precedence; a password holding every reserved character of RFC 3986, raw
or percent-encoded, logs in from each source; no error, record or final line quotes any part
of the user name or password, whichever source the URL came from and whatever is wrong with
it; the credentials are not in /proc/PID/cmdline, and no command warren runs inherits
WARREN_URL. Against the real test broker (RMQ_PORT, RMQ_CTL)."""
import json
import os
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.parse
import uuid

sys.path.insert(0, os.path.dirname(__file__))
from cli_env import WARREN, PORT, CTL, URL, require_warren_and_broker, warren, unique  # noqa: E402

# RFC 3986's reserved characters: gen-delims, then sub-delims.
RESERVED = ":/?#[]@!$&'()*+,;="
# Marker words no message holds by chance: a password cut anywhere still shows one of them.
USER_WORD, HEAD_WORD, TAIL_WORD = "uSERzq", "pASSzq", "tAILzq"
MARKERS = (USER_WORD, HEAD_WORD, TAIL_WORD)


def encoded(text):
    return urllib.parse.quote(text, safe="")


def refusals(creds, user, password):
    """Every way a URL can be refused, credentials around the fault (as tests/client/test_url.cpp)."""
    return [
        f"http://{creds}h",
        f"amqp://{creds}h#fragment",
        f"amqp://{user}%zz:{password}@h",
        f"amqp://{user}/x:{password}@h",
        f"amqp://{user}?x:{password}@h",
        f"amqp://{user}:{password}%z@h",
        f"amqp://{user}:{password}%@h",
        f"amqp://{creds}[::1",
        f"amqp://{creds}[::1]x",
        f"amqp://{creds}h1,[::1",
        f"amqp://{creds}h%zz",
        f"amqp://{creds}h:x",
        f"amqp://{creds}h:0",
        f"amqp://{creds}h:99999",
        f"amqp://{creds}h:5672,h2:-1",
        f"amqp://{creds}h/a/b",
        f"amqp://{creds}h/v%2",
        f"amqp://{creds}h?heartbeat=ten",
        f"amqp://{creds}h?connection_timeout=-1",
        f"amqp://{creds}h?channel_max=70000",
        f"amqp://{creds}h?frame_max=1024",
        f"amqp://{creds}h?auth_mechanism=scram",
        f"amqp://{creds}h?heartbeat=1&heartbeat=2",
        f"amqp://{creds}h?x=%zz",
        f"amqp://{creds}h?heartbeats=10",
        f"amqp://{creds}h?server_name_indication=x",
        f"amqps://{creds}h?server_name_indication=disable",
        f"amqps://{creds}h?verify=verify_none",
        f"amqps://{creds}h?cacertfile=/etc/ssl/x.pem",
    ]


class Credentials(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        require_warren_and_broker()
        # A user whose password holds every reserved character at once.
        cls.user = f"{USER_WORD}-{uuid.uuid4().hex[:8]}"
        cls.password = f"{HEAD_WORD}{RESERVED}{TAIL_WORD}"
        subprocess.run([CTL, "-q", "add_user", cls.user, cls.password], check=True, capture_output=True)
        subprocess.run([CTL, "-q", "set_permissions", "-p", "/", cls.user, ".*", ".*", ".*"], check=True,
                       capture_output=True)
        cls.dir = tempfile.TemporaryDirectory()

    @classmethod
    def tearDownClass(cls):
        subprocess.run([CTL, "-q", "delete_user", cls.user], capture_output=True)
        cls.dir.cleanup()

    def url(self, raw=True, port=None):
        password = self.password if raw else encoded(self.password)
        return f"amqp://{self.user}:{password}@127.0.0.1:{port or PORT}"

    def url_file(self, text, mode=0o600):
        path = os.path.join(self.dir.name, unique("url"))
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, mode)
        return path

    def run_from(self, source, url_text, *args, env_extra=None, timeout=60):
        """Runs warren ARGS with the URL text given by `source`: "--url", "WARREN_URL" or "--url-file"."""
        env = {k: v for k, v in os.environ.items() if k != "WARREN_URL"}
        env.update(env_extra or {})
        cmd = [WARREN, *args]
        if source == "--url":
            cmd += ["--url", url_text]
        elif source == "WARREN_URL":
            env["WARREN_URL"] = url_text
        else:
            cmd += ["--url-file", self.url_file(url_text + "\n")]
        return subprocess.run(cmd, capture_output=True, env=env, timeout=timeout)

    def assertNoCredentials(self, text, context):
        for word in MARKERS:
            self.assertNotIn(word, text, context)

    # ---- logging in

    def test_a_password_with_every_reserved_character_logs_in_from_each_source(self):
        q = unique("creds")
        self.assertEqual(warren("declare", "queue", q).returncode, 0)
        self.addCleanup(lambda: warren("delete", "queue", q))
        sent = 0
        for source in ("--url", "WARREN_URL", "--url-file"):
            for raw in (True, False):
                with self.subTest(source=source, raw=raw):
                    # The broker refuses a user_id that is not the connection's user: this
                    # publish is confirmed only when it logged in as that user.
                    r = self.run_from(source, self.url(raw), "publish", "--routing-key", q, "--confirm",
                                      "--property", f"user_id={self.user}", "--body", f"{source} {raw}")
                    self.assertEqual((r.returncode, r.stderr), (0, b""), r.stderr)
                    sent += 1
        out = warren("consume", "--queue", q, "--count", str(sent), "--timeout", "20")
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(len(out.stdout.splitlines()), sent)

    def test_the_credentials_are_not_on_the_process_command_line(self):
        for source in ("WARREN_URL", "--url-file"):
            with self.subTest(source=source):
                q = unique("creds-ps")
                self.assertEqual(warren("declare", "queue", q).returncode, 0)
                self.addCleanup(lambda q=q: warren("delete", "queue", q))
                env = {k: v for k, v in os.environ.items() if k != "WARREN_URL"}
                cmd = [WARREN, "consume", "--queue", q, "--count", "1", "--timeout", "20"]
                if source == "WARREN_URL":
                    env["WARREN_URL"] = self.url()
                else:
                    cmd += ["--url-file", self.url_file(self.url() + "\n")]
                p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                try:
                    # Read once the exec is through (it reads empty while it is under way).
                    deadline = time.monotonic() + 10
                    while True:
                        with open(f"/proc/{p.pid}/cmdline", "rb") as f:
                            cmdline = f.read().decode(errors="replace")
                        if "consume" in cmdline or time.monotonic() > deadline:
                            break
                        time.sleep(0.01)
                    self.assertIn("consume", cmdline)
                    self.assertNoCredentials(cmdline, cmdline)
                    self.assertNotIn(self.password, cmdline)
                    # And it is logged in: it gets the message published now.
                    self.assertEqual(warren("publish", "--routing-key", q, "--confirm", "--body", "seen").returncode, 0)
                    out, err = p.communicate(timeout=30)
                finally:
                    if p.poll() is None:
                        p.kill()
                        p.wait()
                self.assertEqual((p.returncode, out, err), (0, b"seen\n", b""))

    def test_a_command_warren_runs_does_not_inherit_WARREN_URL(self):
        name, prefix = unique("creds-work"), unique("creds")
        self.addCleanup(self.drop_queues_of, prefix)
        r = self.run_from("WARREN_URL", self.url(), "work", "put", "--queue", name, "--prefix", prefix, "--body", "x")
        self.assertEqual(r.returncode, 0, r.stderr)
        # The command fails (and the message is dead-lettered) if it sees the variable at all.
        r = self.run_from("WARREN_URL", self.url(), "work", "run", "--queue", name, "--prefix", prefix,
                          "--count", "1", "--attempts", "1", "--timeout", "20", "--exec",
                          'if [ -n "${WARREN_URL+set}" ]; then echo "inherited WARREN_URL" >&2; exit 3; fi')
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(r.stdout.decode().startswith("done "), r.stdout)
        self.assertNotIn(b"inherited", r.stderr)

    def drop_queues_of(self, prefix):
        out = subprocess.run([CTL, "-q", "list_queues", "name"], capture_output=True, text=True).stdout
        for name in out.split():
            if name.startswith(prefix + "."):
                warren("delete", "queue", name)

    # ---- precedence and several URLs

    def test_the_command_line_wins_over_WARREN_URL_which_wins_over_the_default(self):
        # Were WARREN_URL read, the command would fail with exit 2.
        env = {"WARREN_URL": "amqp://h:not-a-port"}
        for source in ("--url", "--url-file"):
            with self.subTest(source=source):
                r = self.run_from(source, self.url(), "delete", "queue", unique("creds-p"), env_extra=env)
                self.assertEqual((r.returncode, r.stderr), (0, b""), r.stderr)
        # WARREN_URL alone is read (the default, port 5672, is not this broker's).
        r = self.run_from("WARREN_URL", self.url(), "delete", "queue", unique("creds-p"))
        self.assertEqual((r.returncode, r.stderr), (0, b""), r.stderr)
        # Both on the command line is a mistake, not a merge.
        r = warren("delete", "queue", "x", "--url", self.url(), "--url-file", self.url_file(self.url()), url=None)
        self.assertEqual(r.returncode, 2)
        self.assertEqual(r.stderr.decode().splitlines()[0], "warren: --url excludes --url-file")

    def test_several_urls_fail_over_in_order_from_the_file_and_WARREN_URL(self):
        refused = self.url(port=1)
        # Comments, blank lines, blanks and CRLF line ends around the URLs.
        text = f"# the standby first\n\n  {refused}  \r\n\t{self.url(raw=False)}\r\n"
        q = unique("creds-f")
        for source in ("WARREN_URL", "--url-file"):
            with self.subTest(source=source):
                r = self.run_from(source, text, "declare", "queue", q)
                self.assertEqual((r.returncode, r.stderr), (0, b""), r.stderr)
        self.assertEqual(warren("delete", "queue", q).returncode, 0)
        # Each URL is checked before any is dialled, and the faulty one is named by its line.
        r = self.run_from("--url-file", f"{self.url()}\n\n{self.url()}?hearbeat=5", "declare", "queue", q)
        self.assertEqual(r.returncode, 2)
        self.assertRegex(r.stderr.decode(), r"^warren: --url-file \S+ line 3: invalid URL: unknown parameter hearbeat ")
        r = self.run_from("WARREN_URL", f"{self.url()}\n{self.url()}:x", "declare", "queue", q)
        self.assertEqual(r.stderr.decode(),
                         "warren: WARREN_URL line 2: invalid URL: the port of host 1 is not a number from 1 to 65535\n")

    def test_a_source_without_a_url_is_a_usage_error_not_the_default(self):
        # A secret that did not arrive must not send the command to another broker.
        for text in ("", "  \n", "# only a comment\n"):
            with self.subTest(text=text):
                r = self.run_from("WARREN_URL", text, "declare", "queue", "x")
                self.assertEqual((r.returncode, r.stderr), (2, b"warren: WARREN_URL is set but holds no URL\n"))
                path = self.url_file(text)
                r = warren("declare", "queue", "x", "--url-file", path, url=None)
                self.assertEqual((r.returncode, r.stderr.decode()),
                                 (2, f"warren: --url-file {path}: holds no URL (one a line; blank lines and lines "
                                     "starting with # are skipped)\n"))
        r = warren("declare", "queue", "x", "--url-file", "", url=None)  # "--url-file $UNSET"
        self.assertEqual((r.returncode, r.stderr.decode().splitlines()[0]), (2, "warren: --url-file: an empty path"))
        missing = os.path.join(self.dir.name, "missing")
        r = warren("declare", "queue", "x", "--url-file", missing, url=None)
        self.assertEqual((r.returncode, r.stderr.decode()),
                         (2, f"warren: --url-file {missing}: cannot read it: No such file or directory\n"))

    def test_a_url_file_other_users_can_read_is_warned_about(self):
        q = unique("creds-w")
        self.addCleanup(lambda: warren("delete", "queue", q))
        readable = self.url_file(self.url() + "\n", 0o644)
        r = warren("declare", "queue", q, "--url-file", readable, url=None)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stderr.decode(), f"warren: warning: --url-file {readable} can be read by other users, "
                                            "and the URLs in it hold credentials: chmod o-r it\n")
        r = warren("declare", "queue", q, "--url-file", readable, "--log-format", "json", url=None)
        record = json.loads(r.stderr.decode())
        self.assertEqual((record["event"], record["level"]), ("url_file.readable", "warning"))
        # Readable by its group only is a choice (a service group sharing it): no warning.
        for mode in (0o640, 0o600, 0o400):
            r = warren("declare", "queue", q, "--url-file", self.url_file(self.url() + "\n", mode), url=None)
            self.assertEqual((r.returncode, r.stderr), (0, b""), oct(mode))

    # ---- nothing quotes the credentials

    def assertRefusedQuietly(self, source, url_text, fmt, context):
        r = self.run_from(source, url_text, "declare", "queue", "x", "--log-format", fmt)
        err = r.stderr.decode(errors="replace")
        self.assertEqual((r.returncode, r.stdout), (2, b""), context + " -> " + err)
        self.assertNoCredentials(err, context + " -> " + err)
        lines = err.splitlines()
        self.assertEqual(len(lines), 1, context + " -> " + err)
        # The source is named (and the line of a file), the URL never.
        where = {"--url": "", "WARREN_URL": "WARREN_URL", "--url-file": "--url-file " + self.dir.name}[source]
        if fmt == "json":
            record = json.loads(lines[0])
            self.assertEqual((record["event"], record["level"]), ("command.failed", "error"), err)
            self.assertTrue(record["subject"].startswith(where), err)
            self.assertIn("invalid URL: ", record["cause"], err)
        else:
            self.assertTrue(lines[0].startswith(f"warren: {where}"), err)
            self.assertIn("invalid URL: ", lines[0], err)

    def test_no_refusal_from_any_source_quotes_the_user_name_or_password(self):
        checked = 0
        for special in [*RESERVED, RESERVED]:
            for raw in (True, False):
                # The user name holds the character encoded (a raw '/', '?', '#' or ':' would end it).
                user = f"{USER_WORD}{encoded(special)}{USER_WORD}"
                password = f"{HEAD_WORD}{special if raw else encoded(special)}{TAIL_WORD}"
                creds = f"{user}:{password}@"
                # Every refusal with all the characters at once; one per character besides.
                cases = refusals(creds, user, password) if special == RESERVED else [f"amqp://{creds}h:x"]
                for url_text in cases:
                    for source in ("--url", "WARREN_URL", "--url-file"):
                        for fmt in ("text", "json"):
                            self.assertRefusedQuietly(source, url_text, fmt, f"{source} {fmt} {url_text}")
                            checked += 1
        self.assertEqual(checked, 2 * 6 * (len(RESERVED) + len(refusals("", "", ""))))

    def test_connection_errors_and_records_name_the_host_never_the_credentials(self):
        for source in ("--url", "WARREN_URL", "--url-file"):
            for fmt in ("text", "json"):
                with self.subTest(source=source, fmt=fmt):
                    # A refused port, then the right host with a wrong password (403).
                    r = self.run_from(source, self.url(port=1), "declare", "queue", "x", "--log-level", "debug",
                                      "--log-format", fmt)
                    err = r.stderr.decode(errors="replace")
                    self.assertEqual(r.returncode, 1, err)
                    self.assertIn("127.0.0.1:1", err)
                    self.assertNoCredentials(err, err)
                    wrong = f"amqp://{self.user}:{HEAD_WORD}{RESERVED}wrong@127.0.0.1:{PORT}"
                    r = self.run_from(source, wrong, "declare", "queue", "x", "--log-level", "debug",
                                      "--log-format", fmt)
                    err = r.stderr.decode(errors="replace")
                    self.assertEqual(r.returncode, 1, err)
                    self.assertIn("403", err)
                    self.assertIn(f"127.0.0.1:{PORT}", err)
                    self.assertNoCredentials(err, err)
                    # Logged in: every record of a whole run, up to its close.
                    r = self.run_from(source, self.url(), "delete", "queue", unique("x"), "--log-level", "debug",
                                      "--log-format", fmt)
                    err = r.stderr.decode(errors="replace")
                    self.assertEqual(r.returncode, 0, err)
                    self.assertIn("connection.connected", err)
                    self.assertNoCredentials(err, err)


if __name__ == "__main__":
    unittest.main(verbosity=2)
