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
//
// For fault injection (robustness/) the delay can be changed while the
// proxy runs (SetDelay), the link cut and healed (Partition: bytes in
// flight and new connections wait, as on a network that drops every
// packet until TCP retransmits get through) and every open connection
// dropped (DropConns).
package latproxy

import (
	"net"
	"sync"
	"sync/atomic"
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
	stop chan struct{} // closed by Close

	delay atomic.Int64 // nanoseconds

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	// healed is non-nil while the link is cut and closed when it heals
	// (or the proxy closes).
	healed chan struct{}
	wg     sync.WaitGroup
}

// SetDelay changes the delay added to each direction for the bytes read
// from now on.
func (p *Proxy) SetDelay(d time.Duration) { p.delay.Store(int64(d)) }

// Partition cuts the link (on) or heals it. While cut, nothing is
// forwarded and new connections are held before dialing the target;
// connections stay open, so peers see a silent network until their own
// timeouts fire, and whatever they sent is delivered once it heals.
func (p *Proxy) Partition(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case on && p.healed == nil && !p.closed:
		p.healed = make(chan struct{})
	case !on && p.healed != nil:
		close(p.healed)
		p.healed = nil
	}
}

// DropConns closes every open connection (both sides); new ones are
// accepted as before. It returns how many client connections it closed.
func (p *Proxy) DropConns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
	}
	return len(p.conns) / 2
}

// waitLink returns once the link is not cut; false if done closed first.
func (p *Proxy) waitLink(done <-chan struct{}) bool {
	p.mu.Lock()
	h := p.healed
	p.mu.Unlock()
	if h == nil {
		return true
	}
	select {
	case <-h:
		return true
	case <-done:
		return false
	}
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
	p := &Proxy{opts: opts, ln: ln, conns: map[net.Conn]struct{}{}, stop: make(chan struct{})}
	p.delay.Store(int64(opts.Delay))
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
	if !p.closed {
		close(p.stop)
	}
	p.closed = true
	if p.healed != nil {
		close(p.healed)
		p.healed = nil
	}
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
	if !p.waitLink(p.stop) {
		return
	}
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
			if !p.waitLink(p.stop) {
				break
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
			case q <- chunk{due: time.Now().Add(time.Duration(p.delay.Load())), b: b}:
			case <-done:
				return
			}
		}
		if err != nil {
			return
		}
	}
}
