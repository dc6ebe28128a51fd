package latproxy

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"
)

// echoServer returns the address of a server that echoes every
// connection back.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); io.Copy(c, c) }()
		}
	}()
	return ln.Addr().String()
}

func startProxy(t *testing.T, target string, delay time.Duration) *Proxy {
	t.Helper()
	p, err := Start(Options{Listen: "127.0.0.1:0", Target: target, Delay: delay})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// TestRoundTrip checks that a ping takes about twice the delay.
func TestRoundTrip(t *testing.T) {
	const delay = 15 * time.Millisecond
	p := startProxy(t, echoServer(t), delay)
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, 4)
	for i := range 5 {
		start := time.Now()
		if _, err := c.Write([]byte("ping")); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, buf); err != nil {
			t.Fatal(err)
		}
		rtt := time.Since(start)
		if string(buf) != "ping" {
			t.Fatalf("got %q", buf)
		}
		// Only the lower bound is a property of the proxy; a loaded
		// machine may add any amount on top.
		if rtt < 2*delay {
			t.Errorf("round trip %d took %v, want at least %v", i, rtt, 2*delay)
		}
	}
}

// TestBandwidth checks that the delay does not cap throughput: bytes
// sent together are delayed together, not one buffer per round trip. The
// delay is long (1 s each way) and the data small (4 MiB, at least 16
// reads), so the two differ by 30 s or more against a bound of 8 s, and
// the time to copy 4 MiB, even on a loaded machine under -race, is
// nothing beside either.
func TestBandwidth(t *testing.T) {
	const delay = time.Second
	p := startProxy(t, echoServer(t), delay)
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const size = 4 << 20
	data := bytes.Repeat([]byte("0123456789abcdef"), size/16)
	start := time.Now()
	go func() { c.Write(data) }()
	got := make([]byte, size)
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatal(err)
	}
	el := time.Since(start)
	if !bytes.Equal(got, data) {
		t.Fatal("echoed data differs")
	}
	t.Logf("4 MiB echoed through a proxy of %v each way in %v", delay, el)
	if el < 2*delay {
		t.Errorf("4 MiB came back in %v, under the round trip of %v", el, 2*delay)
	}
	// One 256 KiB buffer per 2 s round trip would take 16 round trips.
	if el > 4*2*delay {
		t.Errorf("4 MiB took %v: bytes sent together were not delayed together (one buffer per round trip would take %v)", el, 16*2*delay)
	}
}

// TestClose checks that Close ends open connections.
func TestClose(t *testing.T) {
	p, err := Start(Options{Listen: "127.0.0.1:0", Target: echoServer(t), Delay: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte("x"))
	io.ReadFull(c, make([]byte, 1))
	done := make(chan struct{})
	go func() { p.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return")
	}
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("connection still open after Close")
	}
}

// TestFaults: a cut link forwards nothing until it heals, then delivers
// what was sent; a new delay applies to the next bytes; DropConns closes
// open connections.
func TestFaults(t *testing.T) {
	p := startProxy(t, echoServer(t), 0)
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, 4)
	ping := func(c net.Conn, wait time.Duration) error {
		if _, err := c.Write([]byte("ping")); err != nil {
			return err
		}
		c.SetReadDeadline(time.Now().Add(wait))
		_, err := io.ReadFull(c, buf)
		return err
	}
	if err := ping(c, 5*time.Second); err != nil {
		t.Fatalf("before the cut: %v", err)
	}

	p.Partition(true)
	if err := ping(c, 300*time.Millisecond); err == nil {
		t.Fatal("an echo crossed a cut link")
	}
	// A new connection is accepted but not forwarded either.
	c2, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if err := ping(c2, 300*time.Millisecond); err == nil {
		t.Fatal("a new connection was forwarded across a cut link")
	}
	p.Partition(false)
	// What was sent during the cut arrives after it heals.
	for _, cc := range []net.Conn{c, c2} {
		cc.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.ReadFull(cc, buf); err != nil || string(buf) != "ping" {
			t.Fatalf("after healing: %q, %v", buf, err)
		}
	}

	const delay = 100 * time.Millisecond
	p.SetDelay(delay)
	start := time.Now()
	if err := ping(c, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if rtt := time.Since(start); rtt < 2*delay {
		t.Errorf("round trip %v after SetDelay(%v), want at least %v", rtt, delay, 2*delay)
	}
	p.SetDelay(0)

	if n := p.DropConns(); n != 2 {
		t.Errorf("DropConns closed %d client connections, want 2", n)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(buf); err == nil {
		t.Error("a dropped connection still reads")
	}
	c3, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	if err := ping(c3, 5*time.Second); err != nil {
		t.Errorf("a new connection after DropConns: %v", err)
	}
}
