package rest

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Limits of an HTTP listener. The zero value of a field takes the
// default of DefaultLimits.
type Limits struct {
	ReadHeader time.Duration // time to read a request's headers
	Read       time.Duration // time to read a whole request
	Write      time.Duration // time to write a response; pprof's 30 s CPU profile fits the default
	Idle       time.Duration // keep-alive connection without a request
	MaxConns   int           // connections served at once; more wait to be accepted
}

// DefaultLimits are kmirror's limits for the REST API and the metrics
// listener.
var DefaultLimits = Limits{
	ReadHeader: 5 * time.Second,
	Read:       30 * time.Second,
	Write:      60 * time.Second,
	Idle:       2 * time.Minute,
	MaxConns:   64,
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits
	if l.ReadHeader > 0 {
		d.ReadHeader = l.ReadHeader
	}
	if l.Read > 0 {
		d.Read = l.Read
	}
	if l.Write > 0 {
		d.Write = l.Write
	}
	if l.Idle > 0 {
		d.Idle = l.Idle
	}
	if l.MaxConns > 0 {
		d.MaxConns = l.MaxConns
	}
	return d
}

// Listen describes one listener: what it is called in logs and errors,
// its address, and the PEM certificate and key for HTTPS (both or none).
type Listen struct {
	Name          string
	Addr          string
	CertFile, Key string
	Limits        Limits
	// AllowedHosts are the names besides localhost and IP addresses that
	// an API without a token answers (kmirror.rest.allowed.hosts).
	AllowedHosts []string
}

// Serve starts serving h. Everything that can fail at start fails here
// and is returned: the address, the certificate and its key. A listener
// that later stops on an error logs it.
func Serve(l Listen, h http.Handler, log *slog.Logger) (*http.Server, net.Addr, error) {
	lim := l.Limits.withDefaults()
	srv := &http.Server{
		Handler:           writeDeadline(h, lim.Write),
		ReadHeaderTimeout: lim.ReadHeader,
		ReadTimeout:       lim.Read,
		IdleTimeout:       lim.Idle,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	if (l.CertFile == "") != (l.Key == "") {
		return nil, nil, fmt.Errorf("%s: HTTPS needs both a certificate and a key", l.Name)
	}
	if l.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(l.CertFile, l.Key)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: loading TLS certificate %s and key %s: %w", l.Name, l.CertFile, l.Key, err)
		}
		srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	ln, err := net.Listen("tcp", l.Addr)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", l.Name, err)
	}
	capped := limitListener(ln, lim.MaxConns)
	go func() {
		var err error
		if srv.TLSConfig != nil {
			err = srv.ServeTLS(capped, "", "")
		} else {
			err = srv.Serve(capped)
		}
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error(l.Name+" stopped", "addr", l.Addr, "err", err)
		}
	}()
	return srv, ln.Addr(), nil
}

// writeDeadline gives each response d to be written; a profile or trace
// of N seconds (/debug/pprof/...?seconds=N) gets N seconds more. It stands
// for http.Server.WriteTimeout, which pprof refuses to outlast.
func writeDeadline(h http.Handler, d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t := d
		if strings.HasPrefix(r.URL.Path, "/debug/pprof/") {
			if n, err := strconv.Atoi(r.URL.Query().Get("seconds")); err == nil && n > 0 {
				t += time.Duration(n) * time.Second
			}
		}
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(t))
		h.ServeHTTP(w, r)
	})
}

// Loopback reports whether addr (host:port) listens on loopback
// addresses only: 127.0.0.0/8, ::1 or localhost. An empty host means
// every interface.
func Loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// limitListener accepts at most n connections at once; Accept waits for
// one to close.
func limitListener(ln net.Listener, n int) net.Listener {
	return &capped{Listener: ln, slots: make(chan struct{}, n), done: make(chan struct{})}
}

type capped struct {
	net.Listener
	slots     chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

func (c *capped) Accept() (net.Conn, error) {
	select {
	case c.slots <- struct{}{}:
	case <-c.done:
		return nil, net.ErrClosed
	}
	conn, err := c.Listener.Accept()
	if err != nil {
		<-c.slots
		return nil, err
	}
	return &slotConn{Conn: conn, free: sync.OnceFunc(func() { <-c.slots })}, nil
}

func (c *capped) Close() error {
	c.closeOnce.Do(func() { close(c.done) })
	return c.Listener.Close()
}

type slotConn struct {
	net.Conn
	free func()
}

func (s *slotConn) Close() error {
	s.free()
	return s.Conn.Close()
}
