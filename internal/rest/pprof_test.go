package rest

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestProfileSeconds: a profile or trace longer than MaxProfileSeconds,
// or a seconds that is no number above 0, is refused at once with 400;
// one within the cap is served.
func TestProfileSeconds(t *testing.T) {
	addr := serve(t, Handler(&fake{}, "s3cret", discard()), Limits{})
	cl := &http.Client{Timeout: 10 * time.Second}
	tests := []struct {
		path string
		code int
	}{
		{"/debug/pprof/profile?seconds=61", 400},
		{"/debug/pprof/profile?seconds=3600", 400},
		{"/debug/pprof/profile?seconds=9223372036854775807", 400},
		{"/debug/pprof/profile?seconds=99999999999999999999", 400},
		{"/debug/pprof/profile?seconds=0", 400},
		{"/debug/pprof/profile?seconds=-5", 400},
		{"/debug/pprof/profile?seconds=soon", 400},
		{"/debug/pprof/trace?seconds=1e300", 400},
		{"/debug/pprof/trace?seconds=NaN", 400},
		{"/debug/pprof/trace?seconds=+Inf", 400},
		{"/debug/pprof/trace?seconds=61", 400},
		{"/debug/pprof/heap?seconds=9223372036854775807", 400},
		{"/debug/pprof/allocs?seconds=100", 400},
		{"/debug/pprof/profile?seconds=1", 200},
		{"/debug/pprof/trace?seconds=0.2", 200},
		{"/debug/pprof/heap?seconds=1", 200},
		{"/debug/pprof/heap", 200},
	}
	for _, tc := range tests {
		req, _ := http.NewRequest("GET", "http://"+addr+tc.path, nil)
		req.Header.Set("Authorization", "Bearer s3cret")
		resp, err := cl.Do(req)
		if err != nil {
			t.Errorf("%s: %v", tc.path, err)
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.code {
			t.Errorf("%s: %d, want %d", tc.path, resp.StatusCode, tc.code)
		}
		if tc.code == 400 && !strings.Contains(string(body), "at most 60") {
			t.Errorf("%s: %.200q; want the cap named", tc.path, body)
		}
	}
	// Without the token, the cap reveals nothing: 401 first.
	resp, err := cl.Get("http://" + addr + "/debug/pprof/profile?seconds=3600")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Errorf("without the token: %d, want 401", resp.StatusCode)
	}
}

// TestWriteTime: the write time of a profile request grows by its seconds
// up to MaxProfileSeconds only, without overflowing.
func TestWriteTime(t *testing.T) {
	for s, want := range map[string]time.Duration{
		"": time.Minute, "1": 61 * time.Second, "60": 2 * time.Minute, "61": 2 * time.Minute,
		"9223372036854775807": 2 * time.Minute, "-3": time.Minute, "x": time.Minute,
	} {
		req, _ := http.NewRequest("GET", "/debug/pprof/profile?seconds="+s, nil)
		if got := writeTime(req, time.Minute); got != want {
			t.Errorf("seconds=%s: %v, want %v", s, got, want)
		}
	}
}
