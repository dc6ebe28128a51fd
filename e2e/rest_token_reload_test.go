package e2e

import (
	"io"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kmirror/kmirror/internal/testkafka"
)

// restCall sends method path to the REST API at addr with token ("" for
// none) and returns the status (0 when the request failed) and body.
func restCall(addr, method, path, token string) (int, string) {
	req, _ := http.NewRequest(method, "http://"+addr+path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	cl := &http.Client{Timeout: 10 * time.Second}
	resp, err := cl.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestRESTTokenReload (issue 19, item 9): a changed kmirror.rest.token
// applies at the reload that reads it, through POST /reload and SIGHUP:
// the old token gets 401 and the new one works. A reload that would
// leave the API without a token is refused naming the key, and the token
// stays. No token reaches the log.
func TestRESTTokenReload(t *testing.T) {
	t.Parallel()
	cs := testkafka.Shared(t, 2)
	a, b := cs[0], cs[1]
	addr := freeAddr(t)
	src, dst := alias(t, "src"), alias(t, "dst")
	topic := testkafka.Topic(t, "tokreload")
	a.CreateTopic(t, topic, 1, nil)
	body := func(tokenLine string) string {
		return mm2Config(src, dst, a, b, src+"->"+dst+".topics = "+topic, "kmirror.rest.listener = "+addr, tokenLine)
	}
	cfg := writeFile(t, "mm2.properties", body("kmirror.rest.token = token-A-1f3e"))
	p := startKmirror(t, cfg)
	waitFor(t, 60*time.Second, "the REST API", func() bool { code, _ := restCall(addr, "GET", "/health", ""); return code == 200 })

	expect := func(when string, want map[string]int) {
		t.Helper()
		for token, code := range want {
			if got, out := restCall(addr, "GET", "/status", token); got != code {
				t.Errorf("%s: /status with %q: %d %s, want %d", when, token, got, out, code)
			}
		}
	}
	expect("at start", map[string]int{"token-A-1f3e": 200, "token-B-9c2d": 401})

	// POST /reload, authorized by the old token, brings the new one.
	if err := os.WriteFile(cfg, []byte(body("kmirror.rest.token = token-B-9c2d")), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out := restCall(addr, "POST", "/reload", "token-A-1f3e"); code != 200 {
		t.Fatalf("POST /reload: %d %s", code, out)
	}
	expect("after POST /reload", map[string]int{"token-A-1f3e": 401, "token-B-9c2d": 200})

	// SIGHUP does the same.
	if err := os.WriteFile(cfg, []byte(body("kmirror.rest.token = token-C-77aa")), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the token of the SIGHUP reload", func() bool {
		code, _ := restCall(addr, "GET", "/status", "token-C-77aa")
		return code == 200
	})
	expect("after SIGHUP", map[string]int{"token-B-9c2d": 401, "token-A-1f3e": 401, "token-C-77aa": 200})

	// A file without a token: refused, naming the key; the token stays.
	if err := os.WriteFile(cfg, []byte(body("")), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out := restCall(addr, "POST", "/reload", "token-C-77aa"); code != 400 || !strings.Contains(out, "kmirror.rest.token") {
		t.Errorf("reload of a file without a token: %d %s, want 400 naming kmirror.rest.token", code, out)
	}
	expect("after the refused reload", map[string]int{"token-C-77aa": 200, "": 401})
	if code, out := restCall(addr, "GET", "/flows/"+src+"->"+dst, "token-C-77aa"); code != 200 || !strings.Contains(out, `"running"`) && !strings.Contains(out, `"starting"`) {
		t.Errorf("the flow after the reloads: %d %s", code, out)
	}

	p.stop()
	for _, tok := range []string{"token-A-1f3e", "token-B-9c2d", "token-C-77aa"} {
		if strings.Contains(p.log.String(), tok) {
			t.Errorf("the log shows the REST token %s", tok)
		}
	}
}
