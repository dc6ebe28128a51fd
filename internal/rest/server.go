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
	"time"
)

// Limits of an HTTP listener. The zero value of a field takes the
// default of DefaultLimits.
type Limits struct {
	ReadHeader time.Duration // time to read a request's headers
	Read       time.Duration // time to read a whole request
	Write      time.Duration // time to write a response; pprof's 30 s CPU profile fits the default
	Idle       time.Duration // keep-alive connection without a request
	// Connections held at once; at the cap a new one closes the least
	// recently used one that waits for a request (conns.go).
	MaxConns int
	// Connections one client (IP address) holds at once; beyond, a new
	// one closes such a connection of the client's own, or is refused.
	MaxConnsPerClient int
	// Connections beyond MaxConns, when all of those are busy, that serve
	// probes (/health, /ready) only.
	ProbeReserve int
}

// DefaultLimits are kmirror's limits for the REST API and the metrics
// listener.
var DefaultLimits = Limits{
	ReadHeader:        5 * time.Second,
	Read:              30 * time.Second,
	Write:             60 * time.Second,
	Idle:              30 * time.Second,
	MaxConns:          64,
	MaxConnsPerClient: 16,
	ProbeReserve:      8,
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
	if l.MaxConnsPerClient > 0 {
		d.MaxConnsPerClient = l.MaxConnsPerClient
	}
	if l.ProbeReserve > 0 {
		d.ProbeReserve = l.ProbeReserve
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
		Handler:           reserved(writeDeadline(h, lim.Write)),
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
	capped := track(ln, lim)
	srv.ConnState, srv.ConnContext = capped.connState, connContext
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
// of N seconds (/debug/pprof/...?seconds=N) gets N seconds more, at most
// MaxProfileSeconds. It stands for http.Server.WriteTimeout, which pprof
// refuses to outlast.
func writeDeadline(h http.Handler, d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(writeTime(r, d)))
		h.ServeHTTP(w, r)
	})
}

// writeTime is how long r's response has to be written: d, plus a
// profile's seconds.
func writeTime(r *http.Request, d time.Duration) time.Duration {
	if strings.HasPrefix(r.URL.Path, "/debug/pprof/") {
		if n, err := strconv.Atoi(r.URL.Query().Get("seconds")); err == nil && n > 0 {
			d += time.Duration(min(n, MaxProfileSeconds)) * time.Second
		}
	}
	return d
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
