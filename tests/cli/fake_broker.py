"""Scripted brokers for the faults a real RabbitMQ will not produce on demand: one that
answers with a corrupt frame, one that completes the handshake and then falls silent, and a
proxy to a real broker that leaves a basic.consume unanswered. Frames are encoded with
python3-pika, a peer independent of warren's codec."""
import socket
import threading

import pika.frame
import pika.spec


def method_frame(channel, method):
    return pika.frame.Method(channel, method).marshal()


class FakeBroker:
    """Listens on a free loopback port; `script(conn)` runs for each connection."""

    def __init__(self, script):
        self.script = script
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(4)
        self.port = self.sock.getsockname()[1]
        self.conns = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(conn)
            threading.Thread(target=self._run, args=(conn,), daemon=True).start()

    def _run(self, conn):
        try:
            self.script(conn)
        except OSError:
            pass

    def close(self):
        self.sock.close()
        for c in self.conns:
            c.close()


def read_frame(conn):
    """Reads one whole frame (header, payload, end byte); returns its bytes."""
    head = _read_exact(conn, 7)
    size = int.from_bytes(head[3:7], "big")
    return head + _read_exact(conn, size + 1)


def _read_exact(conn, n):
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            raise OSError("peer closed")
        data += chunk
    return data


def handshake(conn, heartbeat):
    """Reads the protocol header and plays a broker through connection.open-ok."""
    _read_exact(conn, 8)
    conn.sendall(method_frame(0, pika.spec.Connection.Start(
        server_properties={"product": "fake"}, mechanisms="PLAIN", locales="en_US")))
    read_frame(conn)  # start-ok
    conn.sendall(method_frame(0, pika.spec.Connection.Tune(channel_max=64, frame_max=131072, heartbeat=heartbeat)))
    read_frame(conn)  # tune-ok
    read_frame(conn)  # open
    conn.sendall(method_frame(0, pika.spec.Connection.OpenOk()))


def corrupt_frame_end(conn):
    """Handshake, then a channel.open-ok whose frame end byte is 0x41 instead of 0xCE."""
    handshake(conn, heartbeat=60)
    read_frame(conn)  # channel.open
    frame = method_frame(1, pika.spec.Channel.OpenOk())
    conn.sendall(frame[:-1] + b"\x41")
    _hold(conn)


def silent_after_open(conn):
    """RabbitMQ's heartbeat offer (60 s; the client's smaller one wins), channel.open-ok,
    then nothing at all: no heartbeats, no answers."""
    handshake(conn, heartbeat=60)
    read_frame(conn)  # channel.open
    conn.sendall(method_frame(1, pika.spec.Channel.OpenOk()))
    _hold(conn)


def _hold(conn):
    """Reads and discards whatever comes until the client goes: silence from our side."""
    while conn.recv(65536):
        pass


class BrokerProxy:
    """A TCP proxy to a real broker on `port`, listening on a free loopback port (`url`).
    Subclasses shape what goes through: from_client and to_client each forward one direction
    of one connection (by default unchanged), and end both sockets when either side ends."""

    def __init__(self, port):
        self.port = port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"amqp://guest:guest@127.0.0.1:{self.listener.getsockname()[1]}"
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            broker = socket.create_connection(("127.0.0.1", int(self.port)))
            threading.Thread(target=self.from_client, args=(client, broker), daemon=True).start()
            threading.Thread(target=self.to_client, args=(broker, client), daemon=True).start()

    def from_client(self, src, dst):
        self.pump(src, dst)

    def to_client(self, src, dst):
        self.pump(src, dst)

    def pump(self, src, dst, on_chunk=None):
        """Forwards what `src` sends to `dst`, calling on_chunk(data) before each chunk goes."""
        try:
            while data := src.recv(65536):
                if on_chunk:
                    on_chunk(data)
                dst.sendall(data)
        except OSError:
            pass
        self.close_both(src, dst)

    @staticmethod
    def close_both(*socks):
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def close(self):
        self.listener.close()


class SilentToFirstConsume(BrokerProxy):
    """A proxy that drops the first basic.consume of each client connection, as a node does
    whose queue leader hangs: that consume is never answered (the client's request times out).
    Everything else, and every later consume, goes through. `dropped` counts the consumes
    dropped."""

    def __init__(self, port):
        self.dropped = 0
        self.lock = threading.Lock()
        super().__init__(port)

    @staticmethod
    def is_consume(frame):
        return frame[0] == 1 and frame[7:11] == (60).to_bytes(2, "big") + (20).to_bytes(2, "big")

    def from_client(self, src, dst):
        dropped_here = False
        try:
            dst.sendall(_read_exact(src, 8))  # the protocol header
            while True:
                frame = read_frame(src)
                if not dropped_here and self.is_consume(frame):
                    dropped_here = True
                    with self.lock:
                        self.dropped += 1
                    continue
                dst.sendall(frame)
        except OSError:
            pass
        self.close_both(src, dst)
