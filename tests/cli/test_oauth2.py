"""--password-file against RabbitMQ's OAuth 2 backend (issue 38): node B takes HS256 tokens signed
with RMQ_OAUTH2_KEY (scripts/test.sh). A `warren work run` whose token file a "sidecar" rewrites
with a fresh short-lived token lives well past several token lifetimes and finishes every item,
refreshing in place (connection.update-secret), and no record holds a token; a token that
expired before the login is refused (exit 1, 403); a file that cannot be read is a usage error
(exit 2) naming the path, never a secret."""
import base64
import hashlib
import hmac
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from cli_env import WARREN, PORT, CTL, URL, require_warren_and_broker, warren, unique  # noqa: E402

KEY = os.environ.get("RMQ_OAUTH2_KEY", "")
LIFE = 3  # seconds: refreshed at 2


def b64(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def token(life=LIFE, scopes=("rabbitmq.configure:*/*", "rabbitmq.write:*/*", "rabbitmq.read:*/*")):
    header = b64(json.dumps({"alg": "HS256", "typ": "JWT", "kid": "warren-test"}).encode())
    claims = b64(json.dumps({"sub": "warren-test", "aud": ["rabbitmq"], "scope": list(scopes),
                             "exp": int(time.time()) + life}).encode())
    mac = hmac.new(KEY.encode(), f"{header}.{claims}".encode(), hashlib.sha256).digest()
    return f"{header}.{claims}.{b64(mac)}"


def write_atomically(path, text):
    # As a token agent does: a new file renamed over the old, never a half-written one.
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text + "\n")
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)


class PasswordFile(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        require_warren_and_broker()
        if not KEY:
            raise RuntimeError("RMQ_OAUTH2_KEY must hold node B's signing key (scripts/test.sh sets it)")
        cls.dir = tempfile.TemporaryDirectory()
        cls.url = f"amqp://warren-test@127.0.0.1:{PORT}/%2f"

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def test_work_run_lives_past_several_token_lifetimes_on_a_rotated_file(self):
        for driver in ("uv", "asio"):
            with self.subTest(driver=driver):
                prefix = unique("oauth")
                path = os.path.join(self.dir.name, f"token-{driver}")
                first = token()
                write_atomically(path, first)
                items = 24
                put = warren("work", "put", "--queue", "jobs", "--prefix", prefix, "--driver", driver,
                             "--password-file", path, stdin="".join(f"item {i}\n" for i in range(items)).encode(),
                             url=self.url)
                self.assertEqual(put.returncode, 0, put.stderr.decode(errors="replace"))
                # The sidecar: a fresh 3 s token every 1.5 s, while the worker runs.
                stop = threading.Event()
                written = []

                def rotate():
                    while not stop.wait(1.5):
                        written.append(token())
                        write_atomically(path, written[-1])
                sidecar = threading.Thread(target=rotate)
                sidecar.start()
                started = time.monotonic()
                try:
                    run = warren("work", "run", "--queue", "jobs", "--prefix", prefix, "--driver", driver,
                                 "--password-file", path, "--exec", "sleep 0.4; cat >/dev/null",
                                 "--count", str(items), "--timeout", "60", "--log-level", "info",
                                 "--log-format", "json", url=self.url, timeout=90)
                finally:
                    stop.set()
                    sidecar.join()
                took = time.monotonic() - started
                err = run.stderr.decode(errors="replace")
                self.assertEqual(run.returncode, 0, err)
                self.assertGreater(took, 3 * LIFE, "the run did not outlive several tokens")
                self.assertEqual([line.split(" ")[0] for line in run.stdout.decode().splitlines()], ["done"] * items)
                records = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
                refreshed = [r for r in records if r.get("event") == "credentials.refreshed"]
                self.assertGreaterEqual(len(refreshed), 3, err)
                self.assertFalse([r for r in records if r.get("event") == "connection.connected"][1:],
                                 "the worker reconnected instead of refreshing in place")
                for t in [first] + written:
                    self.assertNotIn(t.split(".")[2], err)  # the signature: no record holds a token
                # Every item acked: the work queue empties (the broker's count may lag the acks a little).
                deadline = time.monotonic() + 10
                while True:
                    depth = subprocess.run([CTL, "-q", "list_queues", "name", "messages"], capture_output=True,
                                           text=True).stdout
                    if f"{prefix}.jobs\t0\n" in depth or time.monotonic() > deadline:
                        break
                    time.sleep(0.2)
                self.assertIn(f"{prefix}.jobs\t0\n", depth)

    def test_an_expired_token_is_refused_at_login(self):
        path = os.path.join(self.dir.name, "expired")
        expired = token(life=-10)
        write_atomically(path, expired)
        r = warren("publish", "--routing-key", "nowhere", "--body", "x", "--password-file", path, url=self.url)
        err = r.stderr.decode(errors="replace")
        self.assertEqual(r.returncode, 1, err)
        self.assertIn("access refused (403)", err)
        for part in expired.split("."):
            self.assertNotIn(part, err)

    def test_a_file_that_cannot_be_read_is_a_usage_error_naming_it(self):
        missing = os.path.join(self.dir.name, "missing")
        r = warren("publish", "--routing-key", "nowhere", "--body", "x", "--password-file", missing, url=self.url)
        self.assertEqual(r.returncode, 2)
        self.assertEqual(r.stderr.decode(),
                         f"warren: --password-file {missing}: cannot read it: No such file or directory\n")
        empty = os.path.join(self.dir.name, "empty")
        open(empty, "w").close()
        r = warren("publish", "--routing-key", "nowhere", "--body", "x", "--password-file", empty, url=self.url)
        self.assertEqual(r.returncode, 2)
        self.assertEqual(r.stderr.decode(), f"warren: --password-file {empty}: empty\n")

    def test_the_file_replaces_the_urls_password_for_an_internal_user_too(self):
        path = os.path.join(self.dir.name, "guest")
        write_atomically(path, "guest")
        r = warren("publish", "--routing-key", "nowhere", "--body", "x", "--password-file", path,
                   url=f"amqp://guest:wrong@127.0.0.1:{PORT}/%2f")
        self.assertEqual(r.returncode, 0, r.stderr.decode(errors="replace"))


if __name__ == "__main__":
    unittest.main(verbosity=2)
