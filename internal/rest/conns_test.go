package rest

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"
)

// dialFrom opens a connection to addr from the loopback address ip
// (127.0.0.0/8), so that tests can play several clients.
func dialFrom(t *testing.T, ip, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 2 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// get sends GET path on c and reads the response within 2 s.
func get(c net.Conn, path string) (*http.Response, error) {
	c.SetDeadline(time.Now().Add(2 * time.Second))
	defer c.SetDeadline(time.Time{})
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: a\r\n\r\n", path); err != nil {
		return nil, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return nil, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp, err
}

// clientIP is the n-th of the test's clients, 127.0.1.n.
func clientIP(n int) string { return fmt.Sprintf("127.0.1.%d", n) }

// TestProbesAnswerAtTheCap: however the connections are taken (idle
// keep-alives, connections that send nothing, busy requests, one client's
// flood), a new client's /health answers within 2 s.
func TestProbesAnswerAtTheCap(t *testing.T) {
	// hold opens n connections, spread over clients clients, each left
	// as how says.
	type hold func(t *testing.T, c net.Conn)
	idle := func(t *testing.T, c net.Conn) {
		if resp, err := get(c, "/health"); err != nil || resp.StatusCode != 200 {
			t.Fatalf("holding connection: %v %v", resp, err)
		}
	}
	silent := func(*testing.T, net.Conn) {}
	busy := func(_ *testing.T, c net.Conn) {
		fmt.Fprintf(c, "GET /slow HTTP/1.1\r\nHost: a\r\n\r\n")
	}
	tests := []struct {
		name    string
		lim     Limits
		busy    int // connections busy in a request first, 16 for each of 4 clients
		n       int // then connections held as how says, spread over clients more clients
		clients int
		how     hold
		status  int  // what /status answers on a new client's connection
		refused bool // a busy client's own new connection is closed at once
	}{
		{"idle keep-alives of one client (issue 19)", Limits{}, 0, 64, 1, idle, 200, false},
		{"idle keep-alives of many clients", Limits{}, 0, 64, 4, idle, 200, false},
		{"a flood of idle keep-alives", Limits{}, 0, 300, 8, idle, 200, false},
		{"connections that send nothing", Limits{ReadHeader: time.Minute}, 0, 64, 4, silent, 200, false},
		{"one client's flood of connections that send nothing", Limits{ReadHeader: time.Minute}, 0, 200, 1, silent, 200, false},
		{"every connection busy", Limits{}, 64, 0, 0, nil, 503, true},
		{"every connection busy, the reserve taken by ones that send nothing", Limits{ReadHeader: time.Minute}, 64, 8, 2, silent, 503, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			release := make(chan struct{})
			var slow atomic.Int64 // requests in /slow
			mux := http.NewServeMux()
			mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })
			mux.HandleFunc("GET /status", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "status") })
			mux.HandleFunc("GET /slow", func(w http.ResponseWriter, _ *http.Request) {
				slow.Add(1)
				<-release
				io.WriteString(w, "slow")
			})
			addr := serve(t, mux, tc.lim)
			t.Cleanup(func() { close(release) })
			for i := range tc.busy {
				busy(t, dialFrom(t, clientIP(1+i%4), addr))
			}
			for deadline := time.Now().Add(5 * time.Second); slow.Load() < int64(tc.busy); time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("%d of %d requests busy", slow.Load(), tc.busy)
				}
			}
			var held []net.Conn
			for i := range tc.n {
				c := dialFrom(t, clientIP(10+i%tc.clients), addr)
				tc.how(t, c)
				held = append(held, c)
			}
			start := time.Now()
			resp, err := get(dialFrom(t, "127.0.0.1", addr), "/health")
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("/health from a new client with %d connections held: %v %v", tc.n, resp, err)
			}
			t.Logf("/health answered in %v", time.Since(start).Round(time.Millisecond))
			resp, err = get(dialFrom(t, "127.0.0.1", addr), "/status")
			if err != nil || resp.StatusCode != tc.status {
				t.Errorf("/status from a new client: %v %v, want %d", resp, err, tc.status)
			}
			// A holding client's own new connection: served, or (its
			// connections all busy) closed at once, never left waiting.
			start = time.Now()
			own := clientIP(10)
			if tc.refused {
				own = clientIP(1)
			}
			resp, err = get(dialFrom(t, own, addr), "/health")
			if tc.refused {
				if err == nil || time.Since(start) > time.Second {
					t.Errorf("a busy client's connection beyond its cap: %v %v after %v, want closed at once", resp, err, time.Since(start))
				}
			} else if err != nil || resp.StatusCode != 200 {
				t.Errorf("/health from a holding client: %v %v", resp, err)
			}
			if len(held) > 0 && !closedWithin(held[0], time.Second) {
				t.Error("the oldest held connection is still open")
			}
		})
	}
}

// TestBusyConnectionsStay: over HTTPS too, a connection busy in a request
// is never closed to make room; at the cap a probe goes to the reserve
// and the busy requests are answered when done.
func TestBusyConnectionsStay(t *testing.T) {
	cert, key := selfSigned(t, t.TempDir())
	release := make(chan struct{})
	var slow atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })
	mux.HandleFunc("GET /slow", func(w http.ResponseWriter, _ *http.Request) {
		slow.Add(1)
		<-release
		io.WriteString(w, "slow")
	})
	srv, a, err := Serve(Listen{Name: "test API", Addr: "127.0.0.1:0", CertFile: cert, Key: key, Limits: Limits{MaxConns: 2}}, mux, discard())
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	addr := a.String()
	dial := func() net.Conn {
		c := tls.Client(dialFrom(t, "127.0.0.1", addr), &tls.Config{InsecureSkipVerify: true})
		t.Cleanup(func() { c.Close() })
		return c
	}
	var busy []net.Conn
	for range 2 {
		c := dial()
		fmt.Fprintf(c, "GET /slow HTTP/1.1\r\nHost: a\r\n\r\n")
		busy = append(busy, c)
	}
	for deadline := time.Now().Add(5 * time.Second); slow.Load() < 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of 2 requests busy", slow.Load())
		}
	}
	if resp, err := get(dial(), "/health"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("/health with every connection busy: %v %v", resp, err)
	}
	close(release)
	for i, c := range busy {
		c.SetDeadline(time.Now().Add(2 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != 200 {
			t.Errorf("busy connection %d: %v %v", i, resp, err)
		}
	}
}
