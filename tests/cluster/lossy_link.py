"""A lossy link between a client and one node, on loopback (issue 39): a TCP proxy that delays
what it forwards, stalls it at random and can cut the node off for a while.

A proxy sees the TCP stream, not packets: a packet the network drops or reorders reaches the
application as a stall while TCP retransmits it (200 ms at least on Linux, doubling), never as
missing or reordered bytes. So loss is modelled as stalls of one direction at random, and a
partition as a blackout of both directions (nothing forwarded; what was sent waits, as TCP
keeps retransmitting it). A blackout longer than two heartbeats makes the client give the
node up; the proxy then closes the other side too. Needs no privileges (tc netem in a
network namespace would need CAP_NET_ADMIN and sch_netem, which a CI host may not give).

    link = LossyLink(upstream_port, seed=7)      # listens on 127.0.0.1:link.port
    link.impair(delay_ms=(5, 40), stall_chance=0.02, stall_ms=(200, 1500))
    link.blackout(3.0)                           # both directions, every connection
    link.close()
"""
import asyncio
import random
import threading
import time


class LossyLink:
    def __init__(self, upstream_port, seed=0, host="127.0.0.1"):
        self.upstream = (host, int(upstream_port))
        self.random = random.Random(seed)
        self.delay_ms = (0, 0)
        self.stall_chance = 0.0
        self._tasks = set()
        self.stall_ms = (200, 1500)
        self.frozen_until = 0.0  # a blackout: every direction of every connection
        self.counts = {"connections": 0, "stalls": 0, "blackouts": 0, "bytes": 0}
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        self._ready.wait(10)
        if not self._ready.is_set():
            raise RuntimeError("lossy link: the proxy did not start")

    # ---- control (any thread)

    def impair(self, delay_ms=(0, 0), stall_chance=0.0, stall_ms=(200, 1500)):
        """From now on: each chunk read waits uniform(delay_ms) ms, and with `stall_chance` it
        (and all behind it in its direction) waits uniform(stall_ms) ms instead: a lost packet."""
        with self._lock:
            self.delay_ms, self.stall_chance, self.stall_ms = tuple(delay_ms), float(stall_chance), tuple(stall_ms)

    def blackout(self, seconds):
        """Nothing forwarded either way for `seconds`, on every connection (a partition)."""
        with self._lock:
            self.frozen_until = max(self.frozen_until, time.monotonic() + seconds)
            self.counts["blackouts"] += 1

    def close(self):
        """Stops the proxy and closes every connection through it (once; later calls do nothing)."""
        if not self._thread.is_alive():
            return
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)

    # ---- the proxy (its own thread and event loop)

    def _run(self):
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._serve())
        self._loop.close()

    async def _serve(self):
        self._stop = asyncio.Event()
        server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        async with server:
            await self._stop.wait()
            server.close()
            for t in list(self._tasks):
                t.cancel()
            # Each pump's writer closes both of its sockets as it ends.
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    def _task(self, coro):
        t = asyncio.ensure_future(coro)
        self._tasks.add(t)
        t.add_done_callback(self._tasks.discard)
        return t

    async def _accept(self, client_reader, client_writer):
        try:
            node_reader, node_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            client_writer.close()
            return
        with self._lock:
            self.counts["connections"] += 1
        ends = [client_writer, node_writer]
        self._task(self._pump(client_reader, node_writer, ends))
        self._task(self._pump(node_reader, client_writer, ends))

    def _release_at(self, last):
        """When a chunk read now may be written: after its delay, any stall and any blackout,
        and never before the chunk ahead of it (TCP keeps order)."""
        now = time.monotonic()
        with self._lock:
            delay = self.random.uniform(*self.delay_ms) / 1000.0
            frozen = self.frozen_until
            stall = 0.0
            if self.stall_chance > 0 and self.random.random() < self.stall_chance:
                stall = self.random.uniform(*self.stall_ms) / 1000.0
                self.counts["stalls"] += 1
        return max(last, now + delay, frozen, now + stall)

    async def _pump(self, reader, writer, ends):
        queue = asyncio.Queue()
        writing = self._task(self._write(queue, writer, ends))
        last = 0.0
        try:
            while True:
                data = await reader.read(65536)
                if not data:
                    break
                last = self._release_at(last)
                await queue.put((last, data))
        except (OSError, asyncio.CancelledError):
            pass
        await queue.put((None, None))
        await writing

    async def _write(self, queue, writer, ends):
        try:
            while True:
                at, data = await queue.get()
                if data is None:
                    break
                # A blackout that began after this chunk was read holds it too.
                while True:
                    with self._lock:
                        wait = max(at, self.frozen_until) - time.monotonic()
                    if wait <= 0:
                        break
                    await asyncio.sleep(min(wait, 0.05))
                writer.write(data)
                await writer.drain()
                with self._lock:
                    self.counts["bytes"] += len(data)
        except (OSError, asyncio.CancelledError):
            pass
        # One side ended: so does the other (a client that gave the node up closes its socket).
        for w in ends:
            try:
                w.close()
            except OSError:
                pass
