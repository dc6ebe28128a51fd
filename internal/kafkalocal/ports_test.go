package kafkalocal

import (
	"sync"
	"testing"
)

// TestFreePorts: ports come from below the ephemeral range (where an
// outgoing connection cannot take one before the node binds it) and are
// not handed out twice, even to callers at the same moment.
func TestFreePorts(t *testing.T) {
	hi := ephemeralLow()
	below := hi-portsLow >= 4*10
	if !below {
		t.Logf("no room below the ephemeral range (%d): FreePorts falls back to the kernel's ports; checking only that none repeats", hi)
	}
	var mu sync.Mutex
	seen := map[int]bool{}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ports, err := FreePorts(10)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			for _, p := range ports {
				if below && (p < portsLow || p >= hi) {
					t.Errorf("port %d is outside %d-%d", p, portsLow, hi-1)
				}
				if seen[p] {
					t.Errorf("port %d handed out twice", p)
				}
				seen[p] = true
			}
		}()
	}
	wg.Wait()
	if len(seen) != 80 {
		t.Errorf("got %d distinct ports, want 80", len(seen))
	}
}
