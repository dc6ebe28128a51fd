package rest

import (
	"bufio"
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
	release := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "status") })
	var slow atomic.Int64 // requests in /slow
	mux.HandleFunc("GET /slow", func(w http.ResponseWriter, _ *http.Request) {
		slow.Add(1)
		defer slow.Add(-1)
		<-release
		io.WriteString(w, "slow")
	})
	defer close(release)

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
		n       int
		clients int
		how     hold
		status  int  // what /status answers on a new client's connection
		refused bool // a holding client's own new connection is closed at once
	}{
		{"idle keep-alives of one client (issue 19)", Limits{}, 64, 1, idle, 200, false},
		{"idle keep-alives of many clients", Limits{}, 64, 4, idle, 200, false},
		{"a flood of idle keep-alives", Limits{}, 300, 8, idle, 200, false},
		{"connections that send nothing", Limits{ReadHeader: time.Minute}, 64, 4, silent, 200, false},
		{"one client's flood of connections that send nothing", Limits{ReadHeader: time.Minute}, 200, 1, silent, 200, false},
		{"every connection busy", Limits{}, 64, 4, busy, 503, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			addr := serve(t, mux, tc.lim)
			var held []net.Conn
			for i := range tc.n {
				c := dialFrom(t, clientIP(1+i%tc.clients), addr)
				tc.how(t, c)
				held = append(held, c)
			}
			if tc.status == 503 {
				for deadline := time.Now().Add(5 * time.Second); slow.Load() < int64(tc.n); time.Sleep(10 * time.Millisecond) {
					if time.Now().After(deadline) {
						t.Fatalf("%d of %d requests busy", slow.Load(), tc.n)
					}
				}
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
			resp, err = get(dialFrom(t, clientIP(1), addr), "/health")
			if tc.refused {
				if err == nil || time.Since(start) > time.Second {
					t.Errorf("a busy client's connection beyond its cap: %v %v after %v, want closed at once", resp, err, time.Since(start))
				}
			} else if err != nil || resp.StatusCode != 200 {
				t.Errorf("/health from a holding client: %v %v", resp, err)
			}
			if !tc.refused && !closedWithin(held[0], time.Second) {
				t.Error("the oldest held connection is still open")
			}
		})
	}
}
