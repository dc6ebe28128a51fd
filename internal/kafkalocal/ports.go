package kafkalocal

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Ports for the nodes are chosen before the nodes (or a test's proxies)
// bind them, seconds later. A port the kernel hands out for 127.0.0.1:0 is
// an ephemeral port, which any outgoing connection may take meanwhile
// (CI once lost a proxy's port so). So ports come from below the
// ephemeral range, handed out in turn through a counter that every
// process on the machine shares under a file lock: a port is given again
// only after the whole range has gone round.

const (
	portsLow  = 10000 // the lowest port handed out
	portsFile = "kmirror-kafkalocal-ports"
)

// FreePorts returns n distinct TCP ports free on 127.0.0.1 now, outside
// the ephemeral range where the machine allows.
func FreePorts(n int) ([]int, error) {
	hi := ephemeralLow()
	if hi-portsLow < 4*n {
		return kernelPorts(n)
	}
	f, err := os.OpenFile(filepath.Join(os.TempDir(), portsFile), os.O_RDWR|os.O_CREATE, 0o666)
	if err != nil {
		return kernelPorts(n)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		return kernelPorts(n)
	}
	defer syscall.Flock(int(f.Fd()), syscall.LOCK_UN)

	next := readNext(f)
	if next < portsLow || next >= hi {
		next = portsLow + rand.IntN(hi-portsLow)
	}
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for tried := 0; len(ports) < n; tried++ {
		if tried == hi-portsLow {
			return nil, fmt.Errorf("no %d free ports on 127.0.0.1 in %d-%d", n, portsLow, hi-1)
		}
		p := next
		if next++; next >= hi {
			next = portsLow
		}
		l, err := net.Listen("tcp", hostPort(p))
		if err != nil {
			continue // taken
		}
		ls = append(ls, l)
		ports = append(ports, p)
	}
	if _, err := f.WriteAt([]byte(fmt.Sprintf("%-10d\n", next)), 0); err != nil {
		return nil, fmt.Errorf("saving the next port to %s: %w", f.Name(), err)
	}
	return ports, nil
}

// readNext reads the shared counter; 0 when there is none yet.
func readNext(f *os.File) int {
	b := make([]byte, 16)
	k, _ := f.ReadAt(b, 0)
	v, err := strconv.Atoi(strings.TrimSpace(string(b[:k])))
	if err != nil {
		return 0
	}
	return v
}

// ephemeralLow is the first port of the kernel's ephemeral range, or
// portsLow (no room below it) where the range cannot be read.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return portsLow
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return portsLow
	}
	lo, err := strconv.Atoi(f[0])
	if err != nil {
		return portsLow
	}
	return lo
}

// kernelPorts asks the kernel for n ports (ephemeral ones). All listeners
// stay open until every port is picked, so none is handed out twice.
func kernelPorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
