package rest

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"sync"
	"time"
)

// A listener's connections are tracked so that no client, and no number
// of clients, can keep the probes (/health, /ready) from being answered:
//
//   - A client (an IP address) holds at most MaxConnsPerClient
//     connections. A new one beyond that closes the client's own
//     least recently used connection that waits for a request (idle
//     keep-alive, else one that has sent nothing yet); when all of them
//     are busy, the new one is closed.
//   - At MaxConns, a new connection closes such a connection of any
//     client in the same way, instead of waiting to be accepted.
//   - When all MaxConns connections are busy, ProbeReserve more are
//     accepted, and they serve probes only: other requests get 503, and
//     each closes after one response.
//
// Accept never waits for a connection to close.

// probePaths are answered on every connection, reserved ones included:
// kmirror's liveness and readiness, and Kafka Connect's root (GET /),
// which Connect deployments probe.
var probePaths = map[string]bool{"/health": true, "/ready": true, "/": true}

// tracker holds a listener's connections.
type tracker struct {
	net.Listener
	max, perClient, reserve int

	mu       sync.Mutex
	conns    map[*conn]struct{}
	byClient map[string]int
}

// conn is one accepted connection.
type conn struct {
	net.Conn
	t      *tracker
	client string
	// Guarded by t.mu: the server's view of the connection, and since
	// when it has been used (accepted, or its last request read).
	state     http.ConnState
	since     time.Time
	probeOnly bool // accepted into the probes' reserve
	closeOnce sync.Once
}

func track(ln net.Listener, lim Limits) *tracker {
	return &tracker{Listener: ln, max: lim.MaxConns, perClient: lim.MaxConnsPerClient, reserve: lim.ProbeReserve,
		conns: make(map[*conn]struct{}), byClient: make(map[string]int)}
}

// Accept returns the next connection that admit lets in; the others are
// closed at once.
func (t *tracker) Accept() (net.Conn, error) {
	for {
		nc, err := t.Listener.Accept()
		if err != nil {
			return nil, err
		}
		c, shed := t.admit(nc)
		if shed != nil {
			shed.Conn.Close()
		}
		if c != nil {
			return c, nil
		}
		nc.Close()
	}
}

// admit makes room for nc as the package comment says and returns it
// tracked, with the connection it closes for it, if any; nil if nc is
// refused.
func (t *tracker) admit(nc net.Conn) (c, shed *conn) {
	client := nc.RemoteAddr().String()
	if h, _, err := net.SplitHostPort(client); err == nil {
		client = h
	}
	c = &conn{Conn: nc, t: t, client: client, state: http.StateNew, since: time.Now()}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.byClient[client] >= t.perClient {
		if shed = t.oldestIdle(client); shed == nil {
			return nil, nil
		}
		t.remove(shed)
	}
	if len(t.conns) >= t.max && shed == nil {
		if shed = t.oldestIdle(""); shed != nil {
			t.remove(shed)
		}
	}
	switch {
	case len(t.conns) >= t.max+t.reserve:
		return nil, nil
	case len(t.conns) >= t.max:
		// Still at the cap: every connection shed was one of the
		// reserve's, or all are busy.
		c.probeOnly = true
	}
	t.conns[c] = struct{}{}
	t.byClient[client]++
	return c, shed
}

// oldestIdle returns the connection of client ("" for any) that waits
// for a request and was used least recently, idle ones before new ones;
// nil if every one is busy.
func (t *tracker) oldestIdle(client string) *conn {
	var best *conn
	for c := range t.conns {
		if client != "" && c.client != client || c.state != http.StateIdle && c.state != http.StateNew {
			continue
		}
		switch {
		case best == nil:
			best = c
		case (c.state == http.StateIdle) != (best.state == http.StateIdle):
			if c.state == http.StateIdle {
				best = c
			}
		case c.since.Before(best.since):
			best = c
		}
	}
	return best
}

// remove forgets c; t.mu is held.
func (t *tracker) remove(c *conn) {
	if _, ok := t.conns[c]; !ok {
		return
	}
	delete(t.conns, c)
	if t.byClient[c.client]--; t.byClient[c.client] <= 0 {
		delete(t.byClient, c.client)
	}
}

// connState is the server's ConnState hook.
func (t *tracker) connState(nc net.Conn, st http.ConnState) {
	c := unwrap(nc)
	if c == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	switch st {
	case http.StateClosed:
		t.remove(c)
	case http.StateActive:
		c.state, c.since = st, time.Now()
	default:
		c.state = st
	}
}

func (c *conn) Close() error {
	c.closeOnce.Do(func() {
		c.t.mu.Lock()
		c.t.remove(c)
		c.t.mu.Unlock()
	})
	return c.Conn.Close()
}

// unwrap returns the tracked connection under nc (a TLS one serves over
// it), or nil.
func unwrap(nc net.Conn) *conn {
	if tc, ok := nc.(*tls.Conn); ok {
		nc = tc.NetConn()
	}
	c, _ := nc.(*conn)
	return c
}

type connKey struct{}

// connContext is the server's ConnContext hook: handlers find their
// connection with connOf.
func connContext(ctx context.Context, nc net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, unwrap(nc))
}

// probesOnly reports whether r came on a connection of the probes'
// reserve.
func probesOnly(r *http.Request) bool {
	c, _ := r.Context().Value(connKey{}).(*conn)
	if c == nil {
		return false
	}
	c.t.mu.Lock()
	defer c.t.mu.Unlock()
	return c.probeOnly
}

// reserved serves h on the probes' reserve: probes only, one request per
// connection.
func reserved(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !probesOnly(r) {
			h.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Connection", "close")
		if r.Method != http.MethodGet && r.Method != http.MethodHead || !probePaths[r.URL.Path] {
			w.Header().Set("Retry-After", "1")
			writeJSON(w, http.StatusServiceUnavailable, errorBody{"too many connections are busy: this one serves only /health and /ready; try again"})
			return
		}
		h.ServeHTTP(w, r)
	})
}
