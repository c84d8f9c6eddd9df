// node's amqplib as a peer in the side-by-side benchmark (bench/compare.sh): the same
// workloads as `warren perf` and rabbitmqc-perf, written the way amqplib's documentation uses
// it (one connection with noDelay, the promise API for set-up, a ConfirmChannel whose publish
// takes a callback per message, publish() returning false honoured by waiting for 'drain'),
// and the same JSON summary line.
//   amqplib-perf --port P --queue Q --workload publish|confirm|consume|latency|rpc --count N
//                [--size B] [--rate R --seconds S]
// Q must exist (compare.sh declares it, with the same arguments for every client).
//   publish: N messages without confirms, until the broker holds them (polled every 5 ms)
//   confirm: N messages with at most 1,000 unconfirmed in flight, topped up once 250 are free
//   consume: N messages already in Q, prefetch 500, a multiple ack every 100 (and the last)
//   latency: a producer paced at R msg/s for S seconds and a consumer (prefetch 500, a
//            multiple ack every 100) on two channels of one connection; each body carries its
//            send time (process.hrtime, ns) in its first 8 bytes
//   rpc:     N calls one after another to `warren rpc serve --queue Q` over direct reply-to
//            (B bytes each way); the latency is a call's round trip
// CPU is this process's user + system time (process.cpuUsage: all threads) from the first
// publish or the subscription to the end, as for the other clients; peak RSS is
// process.resourceUsage().maxRSS (KiB).
'use strict';
const amqp = require('amqplib');

const WINDOW = 1000;  // confirms: at most this many unconfirmed
const TOP_UP = 750;   // a full window is topped up once in-flight is down to this
const PREFETCH = 500;
const ACK_EVERY = 100;
const USAGE = '--port P --queue Q --workload publish|confirm|consume|latency|rpc --count N [--size B] [--rate R --seconds S]';

let finished = false;

function fail(what, err) {
  process.stderr.write(`amqplib-perf: ${what}: ${err && err.message ? err.message : err}\n`);
  process.exit(1);
}

function parse(argv) {
  const a = { port: 5672, queue: '', workload: '', count: 0, size: 64, rate: 0, seconds: 0 };
  if (argv.length % 2 !== 0) fail('usage', USAGE);
  for (let i = 0; i < argv.length; i += 2) {
    const v = argv[i + 1];
    switch (argv[i]) {
      case '--port': a.port = Number(v); break;
      case '--queue': a.queue = v; break;
      case '--workload': a.workload = v; break;
      case '--count': a.count = Number(v); break;
      case '--size': a.size = Number(v); break;
      case '--rate': a.rate = Number(v); break;
      case '--seconds': a.seconds = Number(v); break;
      default: fail('usage', USAGE);
    }
  }
  const counted = ['publish', 'confirm', 'consume', 'rpc'].includes(a.workload);
  if (!a.queue || !Number.isInteger(a.port) || !Number.isInteger(a.size) || a.size < 0) fail('usage', USAGE);
  if (counted && !(Number.isInteger(a.count) && a.count > 0)) fail('usage', USAGE);
  if (a.workload === 'latency' && !(a.rate > 0 && a.seconds > 0 && a.size >= 8))
    fail('usage', 'latency needs --rate R --seconds S and --size of 8 or more');
  if (!counted && a.workload !== 'latency') fail('usage', USAGE);
  return a;
}

// The measured phase: returns a function giving the wall time and the process's CPU (user +
// system) since this call.
function meter() {
  const t0 = process.hrtime.bigint();
  const c0 = process.cpuUsage();
  return () => {
    const c = process.cpuUsage(c0);
    return { seconds: Number(process.hrtime.bigint() - t0) / 1e9, cpu: (c.user + c.system) / 1e6 };
  };
}

const depth = async (ch, queue) => (await ch.checkQueue(queue)).messageCount;
const sleep = ms => new Promise(resolve => setTimeout(resolve, ms));
const drained = ch => new Promise(resolve => ch.once('drain', resolve));

async function publishWorkload(conn, a, body) {
  const ch = await conn.createChannel();
  ch.on('error', err => fail('channel', err));
  const initial = await depth(ch, a.queue);
  const stop = meter();
  let sent = 0;
  while (sent < a.count) {
    const ok = ch.publish('', a.queue, body);
    ++sent;
    if (!ok) await drained(ch);
  }
  // Polled every 5 ms, as warren perf does, so neither side pays for a busy loop.
  while (await depth(ch, a.queue) < initial + sent) await sleep(5);
  return { sent, confirmed: 0, received: 0, ...stop(), channels: [ch] };
}

function confirmWorkload(conn, a, body) {
  return conn.createConfirmChannel().then(ch => new Promise(resolve => {
    ch.on('error', err => fail('channel', err));
    let sent = 0, confirmed = 0, full = false, draining = false, stop;
    // One callback for every publish: amqplib calls it once per message, in order, null for
    // an ack and an error for a nack.
    const settled = err => {
      if (err) fail('publish', 'nacked');
      ++confirmed;
      if (confirmed === a.count) return resolve({ sent, confirmed, received: 0, ...stop(), channels: [ch] });
      // A full window is topped up once a quarter of it is free, as warren perf does.
      if (full && sent - confirmed <= TOP_UP) {
        full = false;
        if (!draining) pump();
      }
    };
    const pump = () => {
      while (sent < a.count) {
        if (sent - confirmed >= WINDOW) {
          full = true;
          return;
        }
        const ok = ch.publish('', a.queue, body, {}, settled);
        ++sent;
        if (!ok) {
          draining = true;
          ch.once('drain', () => {
            draining = false;
            if (!full) pump();
          });
          return;
        }
      }
    };
    stop = meter();
    pump();
  }));
}

async function consumeWorkload(conn, a) {
  const ch = await conn.createChannel();
  ch.on('error', err => fail('channel', err));
  await ch.prefetch(PREFETCH);
  let received = 0, stop;
  const done = new Promise(resolve => {
    stop = meter();
    ch.consume(a.queue, msg => {
      if (msg === null) fail('consume', 'the broker cancelled the consumer');
      if (received === a.count) return;
      ++received;
      if (received % ACK_EVERY === 0 || received === a.count) ch.ack(msg, true);
      if (received === a.count) resolve({ sent: 0, confirmed: 0, received, ...stop(), channels: [ch] });
    }, { noAck: false }).catch(err => fail('basic.consume', err));
  });
  return done;
}

async function latencyWorkload(conn, a) {
  const producer = await conn.createChannel();
  const consumer = await conn.createChannel();
  producer.on('error', err => fail('channel', err));
  consumer.on('error', err => fail('channel', err));
  await consumer.prefetch(PREFETCH);
  const latencies = [];
  let sent = 0, received = 0, stopped = false;
  await consumer.consume(a.queue, msg => {
    if (msg === null) fail('consume', 'the broker cancelled the consumer');
    if (stopped) return;
    const now = process.hrtime.bigint();
    ++received;
    if (msg.content.length >= 8) {
      const t = msg.content.readBigUInt64LE(0);
      if (now >= t) latencies.push(Number(now - t));
    }
    if (received % ACK_EVERY === 0) consumer.ack(msg, true);
  }, { noAck: false });
  // Paced from the start of the run: what may have been sent by now is rate * elapsed + 1;
  // the producer waits 1/rate between turns but at least 1 ms (a fast rate publishes a few
  // per turn), as warren perf does.
  const gapMs = Math.max(1000 / a.rate, 1);
  const runNs = BigInt(Math.round(a.seconds * 1e9));
  const start = process.hrtime.bigint();
  const stop = meter();
  for (;;) {
    const elapsed = process.hrtime.bigint() - start;
    if (elapsed >= runNs) break;
    const allowed = Math.floor(Number(elapsed) / 1e9 * a.rate) + 1;
    let ok = true;
    while (sent < allowed) {
      const body = Buffer.allocUnsafe(a.size).fill(0x63, 8);  // 'c'
      body.writeBigUInt64LE(process.hrtime.bigint(), 0);
      ok = producer.publish('', a.queue, body);
      ++sent;
      if (!ok) break;
    }
    if (!ok) await drained(producer);
    else await sleep(gapMs);
  }
  const m = stop();
  stopped = true;
  latencies.sort((x, y) => x - y);
  return { sent, confirmed: 0, received, ...m, latencies, channels: [producer, consumer] };
}

async function rpcWorkload(conn, a, body) {
  const ch = await conn.createChannel();
  ch.on('error', err => fail('channel', err));
  let waiting = null;  // the call in flight: its id and what to do with its reply
  await ch.consume('amq.rabbitmq.reply-to', msg => {
    if (msg === null) fail('consume', 'the broker cancelled the reply consumer');
    const w = waiting;
    waiting = null;
    if (!w || msg.properties.correlationId !== w.id || msg.content.length !== a.size)
      fail('rpc', `reply ${msg.properties.correlationId} of ${msg.content.length} bytes to call ${w && w.id}`);
    w.resolve();
  }, { noAck: true });
  const latencies = [];
  let sent = 0;
  const stop = meter();
  while (sent < a.count) {
    const id = String(sent);
    const t = process.hrtime.bigint();
    const replied = new Promise(resolve => { waiting = { id, resolve }; });
    ch.publish('', a.queue, body, { replyTo: 'amq.rabbitmq.reply-to', correlationId: id });
    ++sent;
    await replied;
    latencies.push(Number(process.hrtime.bigint() - t));
  }
  const m = stop();
  latencies.sort((x, y) => x - y);
  return { sent, confirmed: 0, received: sent, ...m, latencies, channels: [ch] };
}

// quantile as warren perf's histogram reads it: the sample at rank floor(q*(n-1))+1.
const quantileUs = (sorted, q) => (sorted.length ? sorted[Math.floor(q * (sorted.length - 1))] / 1000 : 0);

(async () => {
  const a = parse(process.argv.slice(2));
  // TCP_NODELAY, as the Java client and Go's net package set by default: amqplib leaves
  // Nagle's algorithm on unless told, and a small publish then waits for the broker's delayed
  // ACK (some 40 ms of latency at 10,000 msg/s).
  const conn = await amqp.connect(`amqp://guest:guest@127.0.0.1:${a.port}/`, { noDelay: true });
  conn.on('error', err => fail('connection', err));
  conn.on('close', () => { if (!finished) fail('connection', 'closed'); });
  {
    const check = await conn.createChannel();  // the queue must exist
    check.on('error', err => fail('queue ' + a.queue, err));
    await check.checkQueue(a.queue);
    await check.close();
  }
  const body = Buffer.alloc(a.size, 'c');
  let r;
  switch (a.workload) {
    case 'publish': r = await publishWorkload(conn, a, body); break;
    case 'confirm': r = await confirmWorkload(conn, a, body); break;
    case 'consume': r = await consumeWorkload(conn, a); break;
    case 'rpc': r = await rpcWorkload(conn, a, body); break;
    default: r = await latencyWorkload(conn, a); break;
  }
  const lat = r.latencies || [];
  const per = Math.max(r.sent, r.received, 1);
  const out = {
    sent: r.sent, confirmed: r.confirmed, received: r.received, seconds: r.seconds,
    send_rate: r.sent / r.seconds, receive_rate: r.received / r.seconds,
    cpu_seconds: r.cpu, cpu_us_per_msg: r.cpu * 1e6 / per,
    latency_us: { p50: quantileUs(lat, 0.5), p99: quantileUs(lat, 0.99) },
    peak_rss_kb: process.resourceUsage().maxRSS,
  };
  process.stdout.write(JSON.stringify(out) + '\n');
  finished = true;
  // Each channel first: its frames (the last ack) are written in order with its close, while
  // the connection's close, on channel 0, could overtake them.
  for (const ch of r.channels) await ch.close();
  await conn.close();
  process.exit(0);
})().catch(err => fail('run', err));
