// Package latproxy is a TCP proxy that delays every byte by a fixed time in
// each direction without limiting bandwidth. The benchmark puts one in
// front of each source broker to emulate a wide-area link on a kernel
// without netem.
//
// Each direction of a connection has a reader and a writer goroutine. The
// reader stamps every chunk it reads with the time it may be forwarded
// (now + delay) and queues it; the writer sleeps until that time and writes
// the chunk. Many chunks are in flight at once, so throughput is bounded by
// the queue (Options.QueueBytes) divided by the delay, not by one round
// trip per read.
package latproxy

import (
	"net"
	"sync"
	"time"
)

// Options configure a Proxy.
type Options struct {
	Listen string        // address to listen on, e.g. 127.0.0.1:0
	Target string        // address to forward to
	Delay  time.Duration // added to each direction
	// QueueBytes bounds the bytes held per direction of a connection; the
	// reader stops reading when the queue is full (TCP backpressure).
	// Default 64 MiB, which allows 4 GB/s at 15 ms.
	QueueBytes int
}

// Proxy forwards connections from its listener to a target address.
type Proxy struct {
	opts Options
	ln   net.Listener

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// Start listens on opts.Listen and forwards connections in the background
// until Close.
func Start(opts Options) (*Proxy, error) {
	if opts.QueueBytes <= 0 {
		opts.QueueBytes = 64 << 20
	}
	ln, err := net.Listen("tcp", opts.Listen)
	if err != nil {
		return nil, err
	}
	p := &Proxy{opts: opts, ln: ln, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the address the proxy listens on.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Close stops listening, closes every connection and waits for the
// forwarding goroutines.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	err := p.ln.Close()
	p.wg.Wait()
	return err
}

func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

func (p *Proxy) serve(client net.Conn) {
	defer p.wg.Done()
	if !p.track(client) {
		return
	}
	defer p.untrack(client)
	server, err := net.DialTimeout("tcp", p.opts.Target, 5*time.Second)
	if err != nil {
		return
	}
	if !p.track(server) {
		return
	}
	defer p.untrack(server)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); p.pipe(server, client) }()
	go func() { defer wg.Done(); p.pipe(client, server) }()
	wg.Wait()
}

// chunk is a piece of the stream and the time it may be written.
type chunk struct {
	due time.Time
	b   []byte
}

// pipe copies src to dst, delaying each chunk by the proxy's delay. When
// either side fails, both connections are closed so that the opposite
// direction ends too.
func (p *Proxy) pipe(dst, src net.Conn) {
	q := make(chan chunk, 4096)
	credit := make(chan struct{}, 1)
	var mu sync.Mutex
	queued := 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		for c := range q {
			if d := time.Until(c.due); d > 0 {
				time.Sleep(d)
			}
			if _, err := dst.Write(c.b); err != nil {
				break
			}
			mu.Lock()
			queued -= len(c.b)
			mu.Unlock()
			select {
			case credit <- struct{}{}:
			default:
			}
		}
		// Closing both ends also stops the reader and the opposite
		// direction; Kafka needs no half-closed connections.
		src.Close()
		dst.Close()
		for range q { // the reader may still be queueing
		}
	}()
	defer func() { <-done }()
	defer close(q)
	buf := make([]byte, 256<<10)
	for {
		mu.Lock()
		full := queued >= p.opts.QueueBytes
		mu.Unlock()
		if full {
			select {
			case <-credit:
				continue
			case <-done:
				return
			}
		}
		n, err := src.Read(buf)
		if n > 0 {
			b := append([]byte(nil), buf[:n]...)
			mu.Lock()
			queued += n
			mu.Unlock()
			select {
			case q <- chunk{due: time.Now().Add(p.opts.Delay), b: b}:
			case <-done:
				return
			}
		}
		if err != nil {
			return
		}
	}
}
