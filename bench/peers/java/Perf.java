// The RabbitMQ Java client's side of the side-by-side benchmark (bench/compare.sh): the same
// workloads as `warren perf` and rabbitmqc-perf, written the way the client's documentation
// uses it (one connection; asynchronous publisher confirms through a ConfirmListener; a
// DefaultConsumer with manual acks, run by the client's consumer thread pool), and the same
// JSON summary line.
//   java-perf --port P --queue Q --workload publish|confirm|consume|latency|rpc --count N
//             [--size B] [--rate R --seconds S] [--warmup N]
// Q must exist (compare.sh declares it, with the same arguments for every client).
//   publish: N messages without confirms, until the broker holds them (polled every 5 ms)
//   confirm: N messages with at most 1,000 unconfirmed in flight, topped up once 250 are free
//   consume: N messages already in Q, prefetch 500, a multiple ack every 100 (and the last)
//   latency: a producer paced at R msg/s for S seconds and a consumer (prefetch 500, a
//            multiple ack every 100) on two channels of one connection; each body carries its
//            send time (System.nanoTime) in its first 8 bytes
//   rpc:     N calls one after another to `warren rpc serve --queue Q` over direct reply-to
//            (B bytes each way), the reply handed over through a queue as the client's RPC
//            tutorial does; the latency is a call's round trip
// --warmup W first moves W messages the same way, unmeasured, so the JIT has compiled the
// hot paths: publish and confirm send W more, consume reads W more (Q must hold W + N),
// latency paces W messages at R msg/s before the S measured seconds, rpc makes W calls more.
// cpu_seconds is the process's CPU (user + system, all threads: JIT and GC included) over the
// measured phase; process_cpu_us_per_msg divides the process's whole CPU, JVM start-up
// included, by the measured messages.
import com.rabbitmq.client.AMQP;
import com.rabbitmq.client.Channel;
import com.rabbitmq.client.ConfirmListener;
import com.rabbitmq.client.Connection;
import com.rabbitmq.client.ConnectionFactory;
import com.rabbitmq.client.DefaultConsumer;
import com.rabbitmq.client.Envelope;
import com.rabbitmq.client.ShutdownSignalException;

import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.Arrays;
import java.util.Locale;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;

public final class Perf {
  static final int WINDOW = 1000;  // confirms: at most this many unconfirmed
  static final int TOP_UP = 750;   // a full window is topped up once in-flight is down to this
  static final int PREFETCH = 500;
  static final int ACK_EVERY = 100;

  static final com.sun.management.OperatingSystemMXBean OS =
      (com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();

  static void die(String what, Object why) {
    System.err.println("java-perf: " + what + ": " + why);
    System.exit(1);
  }

  // The whole process's user + system CPU (all threads), in seconds.
  static double cpuSeconds() { return OS.getProcessCpuTime() / 1e9; }

  static long peakRssKb() {
    try {
      for (String line : Files.readAllLines(Paths.get("/proc/self/status")))
        if (line.startsWith("VmHWM:")) return Long.parseLong(line.replaceAll("[^0-9]", ""));
    } catch (IOException | NumberFormatException e) {
      // no /proc: reported as 0
    }
    return 0;
  }

  // quantile as warren perf's histogram reads it: the sample at rank floor(q*(n-1))+1.
  static double quantileUs(long[] sorted, int n, double q) {
    if (n == 0) return 0;
    return sorted[(int) (q * (n - 1))] / 1000.0;
  }

  final String queue;
  final long count, warmup;
  final double rate, seconds;
  final byte[] body;
  Connection conn;
  Channel ch;

  // Counts over the whole run (warm-up included).
  long sent;
  volatile long confirmed;  // written by the connection's thread under `lock`
  boolean nacked, waiting;  // guarded by `lock`
  final Object lock = new Object();

  // The measured phase.
  long startNs;
  double cpuStart;
  long measuredSent, measuredConfirmed, measuredReceived;
  double measuredSeconds, measuredCpu;
  long[] latencies = new long[0];
  int latencyCount;

  Perf(String queue, long count, long warmup, double rate, double seconds, int size) {
    this.queue = queue;
    this.count = count;
    this.warmup = warmup;
    this.rate = rate;
    this.seconds = seconds;
    this.body = new byte[size];
    Arrays.fill(body, (byte) 'c');
  }

  void startMeasuring() {
    startNs = System.nanoTime();
    cpuStart = cpuSeconds();
  }

  void stopMeasuring() {
    measuredSeconds = (System.nanoTime() - startNs) / 1e9;
    measuredCpu = cpuSeconds() - cpuStart;
  }

  long queueDepth() throws IOException {
    return ch.queueDeclarePassive(queue).getMessageCount();
  }

  void publish(Channel c) throws IOException {
    c.basicPublish("", queue, null, body);
    ++sent;
  }

  void publishWorkload() throws Exception {
    final long initial = queueDepth();
    for (int phase = 0; phase < 2; ++phase) {
      final long n = phase == 0 ? warmup : count;
      if (n == 0) continue;
      if (phase == 1) startMeasuring();
      for (long i = 0; i < n; ++i) publish(ch);
      // Polled every 5 ms, as warren perf does, so neither side pays for a busy loop.
      while (queueDepth() < initial + sent) Thread.sleep(5);
    }
    stopMeasuring();
    measuredSent = count;
  }

  // Waits until at most `max` publishes are unconfirmed; a nack fails the run.
  void awaitInFlight(long max) throws InterruptedException {
    synchronized (lock) {
      while (!nacked && sent - confirmed > max) {
        waiting = true;
        lock.wait();
      }
      waiting = false;
      if (nacked) die("publish", "nacked");
    }
  }

  void confirmWorkload() throws Exception {
    ch.confirmSelect();
    ch.addConfirmListener(new ConfirmListener() {
      // Called on the connection's thread. Confirms come in order on one channel (as
      // rabbitmqc-perf assumes too): an ack of tag T settles every publish up to T.
      @Override
      public void handleAck(long tag, boolean multiple) {
        synchronized (lock) {
          if (tag > confirmed) confirmed = tag;
          if (waiting) lock.notify();
        }
      }

      @Override
      public void handleNack(long tag, boolean multiple) {
        synchronized (lock) {
          nacked = true;
          lock.notify();
        }
      }
    });
    for (int phase = 0; phase < 2; ++phase) {
      final long n = phase == 0 ? warmup : count;
      if (n == 0) continue;
      if (phase == 1) startMeasuring();
      for (long i = 0; i < n; ++i) {
        // A full window is topped up once a quarter of it is free, as warren perf does.
        if (sent - confirmed >= WINDOW) awaitInFlight(TOP_UP);
        publish(ch);
      }
      awaitInFlight(0);
    }
    stopMeasuring();
    measuredSent = count;
    measuredConfirmed = confirmed - warmup;
  }

  void consumeWorkload() throws Exception {
    final long total = warmup + count;
    final CountDownLatch done = new CountDownLatch(1);
    ch.basicQos(PREFETCH);
    if (warmup == 0) startMeasuring();
    ch.basicConsume(queue, false, new DefaultConsumer(ch) {
      long received;  // the consumer thread's alone (the pool runs one channel's deliveries in turn)

      @Override
      public void handleDelivery(String tag, Envelope envelope, AMQP.BasicProperties properties, byte[] b)
          throws IOException {
        if (received == total) return;
        ++received;
        if (received % ACK_EVERY == 0 || received == warmup || received == total)
          getChannel().basicAck(envelope.getDeliveryTag(), true);
        if (received == warmup) startMeasuring();
        if (received == total) {
          stopMeasuring();
          done.countDown();
        }
      }

      @Override
      public void handleShutdownSignal(String tag, ShutdownSignalException cause) {
        if (done.getCount() > 0) die("consume", cause.getMessage());
      }
    });
    done.await();
    measuredReceived = count;
  }

  void latencyWorkload() throws Exception {
    final Channel consumer = conn.createChannel();
    consumer.basicQos(PREFETCH);
    final CountDownLatch warm = new CountDownLatch(1);
    final Object stats = new Object();  // guards the counters the two threads share
    final boolean[] stopped = {false};
    final long[] receivedTotal = {0};
    latencies = new long[(int) Math.min(Integer.MAX_VALUE - 8, (long) (rate * seconds) + 1024)];
    if (warmup == 0) warm.countDown();
    consumer.basicConsume(queue, false, new DefaultConsumer(consumer) {
      @Override
      public void handleDelivery(String tag, Envelope envelope, AMQP.BasicProperties properties, byte[] b)
          throws IOException {
        final long now = System.nanoTime();
        long n;
        synchronized (stats) {
          if (stopped[0]) return;
          n = ++receivedTotal[0];
          if (n > warmup) {
            ++measuredReceived;
            if (b.length >= 8) {
              final long t = ByteBuffer.wrap(b).order(ByteOrder.LITTLE_ENDIAN).getLong(0);
              if (now >= t) {
                if (latencyCount == latencies.length) latencies = Arrays.copyOf(latencies, latencyCount * 2);
                latencies[latencyCount++] = now - t;
              }
            }
          }
        }
        if (n % ACK_EVERY == 0 || n == warmup) getChannel().basicAck(envelope.getDeliveryTag(), true);
        if (n == warmup) warm.countDown();
      }

      @Override
      public void handleShutdownSignal(String tag, ShutdownSignalException cause) {
        synchronized (stats) {
          if (stopped[0]) return;
        }
        die("consume", cause.getMessage());
      }
    });
    final ByteBuffer stamp = ByteBuffer.wrap(body).order(ByteOrder.LITTLE_ENDIAN);
    // Paced from the start of each phase: what may have been sent by now is rate * elapsed + 1;
    // the producer sleeps 1/rate between turns but at least 1 ms (a fast rate publishes a few
    // per turn), as warren perf does. The warm-up paces W messages the same way.
    final long gapNs = Math.max((long) (1e9 / rate), 1_000_000L);
    for (int phase = 0; phase < 2; ++phase) {
      if (phase == 0 && warmup == 0) continue;
      final long base = sent;
      final long phaseStart = System.nanoTime();
      if (phase == 1) startMeasuring();
      final long runNs = (long) (seconds * 1e9);
      while (true) {
        final long elapsed = System.nanoTime() - phaseStart;
        if (phase == 1 && elapsed >= runNs) break;
        long allowed = (long) (elapsed / 1e9 * rate) + 1;
        if (phase == 0) allowed = Math.min(allowed, warmup);
        while (sent - base < allowed) {
          stamp.putLong(0, System.nanoTime());
          publish(ch);
        }
        if (phase == 0 && sent - base == warmup) break;
        LockSupport.parkNanos(gapNs);
      }
      if (phase == 0 && !warm.await(60, TimeUnit.SECONDS)) die("latency", "the warm-up's messages did not all arrive");
    }
    synchronized (stats) {
      stopped[0] = true;
      stopMeasuring();
    }
    measuredSent = sent - warmup;
  }

  void rpcWorkload() throws Exception {
    final BlockingQueue<AMQP.BasicProperties> replies = new ArrayBlockingQueue<>(1);
    final int[] replySize = {0};
    ch.basicConsume("amq.rabbitmq.reply-to", true, new DefaultConsumer(ch) {
      @Override
      public void handleDelivery(String tag, Envelope envelope, AMQP.BasicProperties properties, byte[] b) {
        replySize[0] = b.length;  // read after take(): the queue orders it
        replies.offer(properties);
      }
    });
    latencies = new long[(int) count];
    for (int phase = 0; phase < 2; ++phase) {
      final long n = phase == 0 ? warmup : count;
      if (n == 0) continue;
      if (phase == 1) startMeasuring();
      for (long i = 0; i < n; ++i) {
        final String id = Long.toString(sent);
        final AMQP.BasicProperties props =
            new AMQP.BasicProperties.Builder().replyTo("amq.rabbitmq.reply-to").correlationId(id).build();
        final long t = System.nanoTime();
        ch.basicPublish("", queue, props, body);
        ++sent;
        final AMQP.BasicProperties reply = replies.poll(10, TimeUnit.SECONDS);
        if (reply == null) die("rpc", "no reply to call " + id + " within 10 s");
        if (!id.equals(reply.getCorrelationId()) || replySize[0] != body.length)
          die("rpc", "reply " + reply.getCorrelationId() + " of " + replySize[0] + " bytes to call " + id);
        if (phase == 1) latencies[latencyCount++] = System.nanoTime() - t;
      }
    }
    stopMeasuring();
    measuredSent = count;
    measuredReceived = count;
  }

  static String num(double v) {
    if (Double.isNaN(v) || Double.isInfinite(v)) return "0";
    return String.format(Locale.ROOT, "%.6f", v);
  }

  String summary() {
    Arrays.sort(latencies, 0, latencyCount);
    final double per = Math.max(1, Math.max(measuredSent, measuredReceived));
    final double processCpu = cpuSeconds();
    return "{\"sent\":" + measuredSent
        + ",\"confirmed\":" + measuredConfirmed
        + ",\"received\":" + measuredReceived
        + ",\"seconds\":" + num(measuredSeconds)
        + ",\"send_rate\":" + num(measuredSent / measuredSeconds)
        + ",\"receive_rate\":" + num(measuredReceived / measuredSeconds)
        + ",\"cpu_seconds\":" + num(measuredCpu)
        + ",\"cpu_us_per_msg\":" + num(measuredCpu * 1e6 / per)
        + ",\"process_cpu_us_per_msg\":" + num(processCpu * 1e6 / per)
        + ",\"latency_us\":{\"p50\":" + num(quantileUs(latencies, latencyCount, 0.5))
        + ",\"p99\":" + num(quantileUs(latencies, latencyCount, 0.99)) + "}"
        + ",\"peak_rss_kb\":" + peakRssKb() + "}";
  }

  public static void main(String[] args) {
    final String usage =
        "--port P --queue Q --workload publish|confirm|consume|latency|rpc --count N [--size B] [--rate R --seconds S] [--warmup N]";
    int port = 5672, size = 64;
    String queue = null, workload = null;
    long count = 0, warmup = 0;
    double rate = 0, seconds = 0;
    try {
      if (args.length % 2 != 0) die("usage", usage);
      for (int i = 0; i < args.length; i += 2) {
        final String v = args[i + 1];
        switch (args[i]) {
          case "--port": port = Integer.parseInt(v); break;
          case "--queue": queue = v; break;
          case "--workload": workload = v; break;
          case "--count": count = Long.parseLong(v); break;
          case "--size": size = Integer.parseInt(v); break;
          case "--rate": rate = Double.parseDouble(v); break;
          case "--seconds": seconds = Double.parseDouble(v); break;
          case "--warmup": warmup = Long.parseLong(v); break;
          default: die("usage", usage);
        }
      }
    } catch (NumberFormatException e) {
      die("usage", usage);
    }
    if (queue == null || workload == null || warmup < 0 || size < 0) die("usage", usage);
    switch (workload) {
      case "publish": case "confirm": case "consume": case "rpc":
        if (count <= 0) die("usage", usage);
        break;
      case "latency":
        if (rate <= 0 || seconds <= 0 || size < 8)
          die("usage", "latency needs --rate R --seconds S and --size of 8 or more");
        break;
      default:
        die("usage", usage);
    }
    final Perf p = new Perf(queue, count, warmup, rate, seconds, size);
    try {
      final ConnectionFactory factory = new ConnectionFactory();
      factory.setHost("127.0.0.1");
      factory.setPort(port);
      factory.setUsername("guest");
      factory.setPassword("guest");
      p.conn = factory.newConnection();
      p.ch = p.conn.createChannel();
      p.queueDepth();  // the queue must exist
      switch (workload) {
        case "publish": p.publishWorkload(); break;
        case "confirm": p.confirmWorkload(); break;
        case "consume": p.consumeWorkload(); break;
        case "rpc": p.rpcWorkload(); break;
        default: p.latencyWorkload(); break;
      }
      System.out.println(p.summary());
      System.out.flush();
      p.conn.close();
    } catch (Exception e) {
      die(workload, e);
    }
    System.exit(0);
  }
}
