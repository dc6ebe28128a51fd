package rest

import (
	"errors"
	"net/http"
	"testing"
)

// TestTokenSet: a token Set while the API serves is the one requests must
// bring from then on, and the old one is refused; Set cannot turn the
// token on or off.
func TestTokenSet(t *testing.T) {
	tok := NewToken("old-token")
	addr := serve(t, HandlerToken(&fake{}, tok, discard()), Limits{})
	code := func(path, token string) int {
		req, _ := http.NewRequest("GET", "http://"+addr+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	check := func(when string, want map[string]int) {
		t.Helper()
		for token, c := range want {
			for _, path := range []string{"/status", "/debug/pprof/cmdline"} {
				if got := code(path, token); got != c {
					t.Errorf("%s: %s with %q: %d, want %d", when, path, token, got, c)
				}
			}
		}
	}
	check("at start", map[string]int{"old-token": 200, "new-token": 401})
	if err := tok.Set("new-token"); err != nil {
		t.Fatal(err)
	}
	check("after Set", map[string]int{"old-token": 401, "new-token": 200})
	if err := tok.Set(""); !errors.Is(err, ErrTokenOnOff) {
		t.Errorf("Set(\"\") on a guarded API: %v, want ErrTokenOnOff", err)
	}
	check("after a refused Set", map[string]int{"old-token": 401, "new-token": 200, "": 401})
	if err := NewToken("").Set("x"); !errors.Is(err, ErrTokenOnOff) {
		t.Errorf("Set on an open API: %v, want ErrTokenOnOff", err)
	}
}
