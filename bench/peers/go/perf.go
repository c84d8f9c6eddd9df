// The amqp091-go side of the side-by-side benchmark (bench/compare.sh): the same workloads as
// `warren perf` and rabbitmqc-perf, written the way amqp091-go's documentation uses it (one
// connection, a goroutine per role, confirms through NotifyPublish, deliveries from the
// channel Consume returns), and the same JSON summary line.
//
//	amqp091-go-perf --port P --queue Q --workload publish|confirm|consume|latency|rpc --count N
//	                [--size B] [--rate R --seconds S]
//
// Q must exist (compare.sh declares it, with the same arguments for every client).
//
//	publish: N messages without confirms, until the broker holds them (polled every 5 ms)
//	confirm: N messages with at most 1,000 unconfirmed in flight, topped up once 250 are free
//	consume: N messages already in Q, prefetch 500, a multiple ack every 100 (and the last)
//	latency: a producer paced at R msg/s for S seconds and a consumer (prefetch 500, a
//	         multiple ack every 100) on two channels of one connection; each body carries its
//	         send time (monotonic ns) in its first 8 bytes
//	rpc:     N calls one after another to `warren rpc serve --queue Q` over direct reply-to
//	         (B bytes each way); the latency is a call's round trip
//
// CPU is this process's user + system time (getrusage) from the first publish or the
// subscription to the end, as for the other clients. Built with Debian's amqp091-go 1.5.0
// (GOPATH mode, no module download): bench/peers/build.sh.
package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

const (
	window   = 1000 // confirms: at most this many unconfirmed
	topUp    = 750  // a full window is topped up once in-flight is down to this
	prefetch = 500
	ackEvery = 100
)

func die(what string, err error) {
	fmt.Fprintf(os.Stderr, "amqp091-go-perf: %s: %v\n", what, err)
	os.Exit(1)
}

func rusage() syscall.Rusage {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		die("getrusage", err)
	}
	return u
}

func cpuSeconds() float64 {
	u := rusage()
	return float64(u.Utime.Sec+u.Stime.Sec) + float64(u.Utime.Usec+u.Stime.Usec)/1e6
}

// The monotonic clock's origin for the timestamps in the bodies (time.Since reads the
// monotonic clock).
var origin = time.Now()

func nowNs() uint64 { return uint64(time.Since(origin)) }

type summary struct {
	Sent        uint64             `json:"sent"`
	Confirmed   uint64             `json:"confirmed"`
	Received    uint64             `json:"received"`
	Seconds     float64            `json:"seconds"`
	SendRate    float64            `json:"send_rate"`
	ReceiveRate float64            `json:"receive_rate"`
	CPUSeconds  float64            `json:"cpu_seconds"`
	CPUPerMsg   float64            `json:"cpu_us_per_msg"`
	Latency     map[string]float64 `json:"latency_us"`
	PeakRSSKB   int64              `json:"peak_rss_kb"`
}

// quantile as warren perf's histogram reads it: the sample at rank floor(q*(n-1))+1.
func quantileUs(sorted []uint64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	return float64(sorted[int(q*float64(len(sorted)-1))]) / 1000
}

func queueDepth(ch *amqp.Channel, queue string) int {
	q, err := ch.QueueDeclarePassive(queue, false, false, false, false, nil)
	if err != nil {
		die("queue.declare "+queue, err)
	}
	return q.Messages
}

func main() {
	port := flag.Int("port", 5672, "broker port on 127.0.0.1")
	queue := flag.String("queue", "", "queue (must exist)")
	workload := flag.String("workload", "", "publish|confirm|consume|latency|rpc")
	count := flag.Uint64("count", 0, "messages")
	size := flag.Int("size", 64, "body bytes")
	rate := flag.Float64("rate", 0, "latency: messages per second")
	seconds := flag.Float64("seconds", 0, "latency: seconds")
	flag.Parse()
	usage := errors.New("--port P --queue Q --workload publish|confirm|consume|latency|rpc --count N [--size B] [--rate R --seconds S]")
	switch *workload {
	case "publish", "confirm", "consume", "rpc":
		if *count == 0 {
			die("usage", usage)
		}
	case "latency":
		if *rate <= 0 || *seconds <= 0 || *size < 8 {
			die("usage", errors.New("latency needs --rate R --seconds S and --size of 8 or more"))
		}
	default:
		die("usage", usage)
	}
	if *queue == "" || flag.NArg() > 0 {
		die("usage", usage)
	}

	conn, err := amqp.Dial("amqp://guest:guest@127.0.0.1:" + strconv.Itoa(*port) + "/")
	if err != nil {
		die("connect", err)
	}
	ch, err := conn.Channel()
	if err != nil {
		die("channel.open", err)
	}
	initial := queueDepth(ch, *queue)

	body := make([]byte, *size)
	for i := range body {
		body[i] = 'c'
	}
	var out summary
	var start time.Time
	var cpuStart float64
	var latencies []uint64
	ctx := context.Background()
	publish := func(b []byte) {
		if err := ch.PublishWithContext(ctx, "", *queue, false, false, amqp.Publishing{Body: b}); err != nil {
			die("publish", err)
		}
		out.Sent++
	}

	switch *workload {
	case "publish":
		start, cpuStart = time.Now(), cpuSeconds()
		for out.Sent < *count {
			publish(body)
		}
		// Polled every 5 ms, as warren perf does, so neither side pays for a busy loop.
		for queueDepth(ch, *queue) < initial+int(out.Sent) {
			time.Sleep(5 * time.Millisecond)
		}

	case "confirm":
		if err := ch.Confirm(false); err != nil {
			die("confirm.select", err)
		}
		// One Confirmation per message, in publishing order (the library splits multiple
		// acks); room for the whole window so the connection's reader never blocks on it.
		confirms := ch.NotifyPublish(make(chan amqp.Confirmation, window))
		settle := func() {
			c, ok := <-confirms
			if !ok {
				die("publish", errors.New("the channel closed with messages unconfirmed"))
			}
			if !c.Ack {
				die("publish", fmt.Errorf("message %d nacked", c.DeliveryTag))
			}
			out.Confirmed++
		}
		start, cpuStart = time.Now(), cpuSeconds()
		for out.Sent < *count {
			// A full window is topped up once a quarter of it is free, as warren perf does.
			if out.Sent-out.Confirmed >= window {
				for out.Sent-out.Confirmed > topUp {
					settle()
				}
			}
			publish(body)
		}
		for out.Confirmed < out.Sent {
			settle()
		}

	case "consume":
		if err := ch.Qos(prefetch, 0, false); err != nil {
			die("basic.qos", err)
		}
		deliveries, err := ch.Consume(*queue, "", false, false, false, false, nil)
		if err != nil {
			die("basic.consume "+*queue, err)
		}
		start, cpuStart = time.Now(), cpuSeconds()
		for d := range deliveries {
			out.Received++
			if out.Received%ackEvery == 0 || out.Received == *count {
				if err := d.Ack(true); err != nil {
					die("ack", err)
				}
			}
			if out.Received == *count {
				break
			}
		}
		if out.Received < *count {
			die("consume", errors.New("the channel closed early"))
		}

	case "latency":
		// The consumer on a second channel of the same connection, in a goroutine of its own.
		cch, err := conn.Channel()
		if err != nil {
			die("channel.open", err)
		}
		if err := cch.Qos(prefetch, 0, false); err != nil {
			die("basic.qos", err)
		}
		deliveries, err := cch.Consume(*queue, "", false, false, false, false, nil)
		if err != nil {
			die("basic.consume "+*queue, err)
		}
		var mu sync.Mutex
		stopped := false
		latencies = make([]uint64, 0, int(*rate**seconds)+1024)
		go func() {
			for d := range deliveries {
				now := nowNs()
				mu.Lock()
				if stopped {
					mu.Unlock()
					return
				}
				out.Received++
				if len(d.Body) >= 8 {
					if t := binary.LittleEndian.Uint64(d.Body); now >= t {
						latencies = append(latencies, now-t)
					}
				}
				n := out.Received
				mu.Unlock()
				if n%ackEvery == 0 {
					if err := d.Ack(true); err != nil {
						mu.Lock()
						late := stopped // the run is over and the connection closing
						mu.Unlock()
						if !late {
							die("ack", err)
						}
						return
					}
				}
			}
		}()
		// Paced from the start of the run: what may have been sent by now is rate * elapsed
		// + 1; the producer sleeps 1/rate between turns but at least 1 ms (a fast rate
		// publishes a few per turn), as warren perf does.
		gap := time.Duration(float64(time.Second) / *rate)
		if gap < time.Millisecond {
			gap = time.Millisecond
		}
		runFor := time.Duration(*seconds * float64(time.Second))
		start, cpuStart = time.Now(), cpuSeconds()
		for {
			elapsed := time.Since(start)
			if elapsed >= runFor {
				break
			}
			allowed := uint64(elapsed.Seconds()**rate) + 1
			for out.Sent < allowed {
				binary.LittleEndian.PutUint64(body, nowNs())
				publish(body)
			}
			time.Sleep(gap)
		}
		mu.Lock()
		stopped = true
		mu.Unlock()

	case "rpc":
		// Calls one after another over direct reply-to, as bench-read-latency --mode rpc does:
		// the server (`warren rpc serve --queue Q`) replies with as many bytes as it was sent.
		replies, err := ch.Consume("amq.rabbitmq.reply-to", "", true, false, false, false, nil)
		if err != nil {
			die("basic.consume amq.rabbitmq.reply-to", err)
		}
		latencies = make([]uint64, 0, *count)
		start, cpuStart = time.Now(), cpuSeconds()
		for out.Sent < *count {
			id := strconv.FormatUint(out.Sent, 10)
			t := nowNs()
			if err := ch.PublishWithContext(ctx, "", *queue, false, false,
				amqp.Publishing{Body: body, ReplyTo: "amq.rabbitmq.reply-to", CorrelationId: id}); err != nil {
				die("publish", err)
			}
			out.Sent++
			d, ok := <-replies
			if !ok {
				die("rpc", errors.New("the channel closed before a reply"))
			}
			if d.CorrelationId != id || len(d.Body) != *size {
				die("rpc", fmt.Errorf("reply %q of %d bytes to call %s", d.CorrelationId, len(d.Body), id))
			}
			latencies = append(latencies, nowNs()-t)
			out.Received++
		}
	}

	out.Seconds = time.Since(start).Seconds()
	out.CPUSeconds = cpuSeconds() - cpuStart
	per := out.Sent
	if out.Received > per {
		per = out.Received
	}
	if per == 0 {
		per = 1
	}
	out.SendRate = float64(out.Sent) / out.Seconds
	out.ReceiveRate = float64(out.Received) / out.Seconds
	out.CPUPerMsg = out.CPUSeconds * 1e6 / float64(per)
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	out.Latency = map[string]float64{"p50": quantileUs(latencies, 0.5), "p99": quantileUs(latencies, 0.99)}
	out.PeakRSSKB = rusage().Maxrss
	line, err := json.Marshal(out)
	if err != nil {
		die("json", err)
	}
	os.Stdout.Write(append(line, '\n'))
	conn.Close()
}
