package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kmirror/kmirror/internal/testkafka"
)

// TestRESTControl drives a running kmirror through its REST API: status,
// pause, resume, restart, reload (good and bad files), and the token, on
// both data paths.
func TestRESTControl(t *testing.T) {
	t.Parallel()
	t.Run("passthrough", func(t *testing.T) {
		t.Parallel()
		restControl(t)
	})
	t.Run("re-encode", func(t *testing.T) {
		t.Parallel()
		restControl(t, reencodeAll)
	})
	t.Run("re-encode one lane", func(t *testing.T) {
		t.Parallel()
		restControl(t, reencodeAll, oneLane)
	})
}

func restControl(t *testing.T, extra ...string) {
	cs := testkafka.Shared(t, 2)
	a, b := cs[0], cs[1]
	prefix := testkafka.Topic(t, "rest")
	one, two := prefix+"-one", prefix+"-two"
	a.CreateTopic(t, one, 1, nil)
	a.CreateTopic(t, two, 1, nil)
	produceN(t, a, one, 1, 10, "first")
	produceN(t, a, two, 1, 7, "other")

	addr := freeAddr(t)
	src, dst := alias(t, "src"), alias(t, "dst")
	name := src + "->" + dst
	body := func(topics string) string {
		return mm2Config(src, dst, a, b, append([]string{name + ".topics = " + topics, "kmirror.rest.listener = " + addr, "kmirror.rest.token = t0ken-42"}, extra...)...)
	}
	cfg := writeFile(t, "mm2.properties", body(one))
	p := startKmirror(t, cfg)
	remote := src + "." + one

	call := func(method, path, token string) (int, string) {
		req, _ := http.NewRequest(method, "http://"+addr+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	flowState := func() string {
		code, out := call("GET", "/flows/"+name, "t0ken-42")
		if code != 200 {
			return "http " + strconv.Itoa(code)
		}
		var st struct {
			State string `json:"state"`
		}
		json.Unmarshal([]byte(out), &st)
		return st.State
	}

	waitFor(t, 60*time.Second, "first records", func() bool { return countOrZero(t, b, remote) == 10 })
	if code, _ := call("GET", "/health", ""); code != 200 {
		t.Errorf("/health: %d", code)
	}
	if code, _ := call("GET", "/status", ""); code != 401 {
		t.Errorf("/status without a token: %d, want 401", code)
	}
	waitFor(t, 10*time.Second, "status running", func() bool { return flowState() == "running" })
	if code, out := call("GET", "/status", "t0ken-42"); code != 200 || !strings.Contains(out, `"done": 9`) {
		t.Errorf("/status: %d %s; want partition done at 9", code, out)
	}

	if code, out := call("POST", "/flows/"+name+"/pause", "t0ken-42"); code != 200 {
		t.Fatalf("pause: %d %s", code, out)
	}
	produceN(t, a, one, 1, 5, "while-paused")
	// The paused flow sees the 5 new records (its health check reads the
	// source's end) and copies none of them.
	waitFor(t, 30*time.Second, "the paused flow to show a lag of 5", func() bool {
		_, out := call("GET", "/flows/"+name, "t0ken-42")
		var st struct {
			Partitions []struct {
				Topic string `json:"topic"`
				State string `json:"state"`
				Lag   int64  `json:"lag"`
			} `json:"partitions"`
		}
		json.Unmarshal([]byte(out), &st)
		return len(st.Partitions) == 1 && st.Partitions[0].Topic == one && st.Partitions[0].State == "paused" && st.Partitions[0].Lag == 5
	})
	if n := countAll(t, b, remote); n != 10 || flowState() != "paused" {
		t.Errorf("paused flow: target has %d records (want 10), state %s", n, flowState())
	}
	if code, out := call("POST", "/flows/"+name+"/resume", "t0ken-42"); code != 200 {
		t.Fatalf("resume: %d %s", code, out)
	}
	waitFor(t, 30*time.Second, "records after resume", func() bool { return countAll(t, b, remote) == 15 })

	if code, out := call("POST", "/flows/"+name+"/restart", "t0ken-42"); code != 200 {
		t.Fatalf("restart: %d %s", code, out)
	}
	produceN(t, a, one, 1, 5, "after-restart")
	waitFor(t, 30*time.Second, "records after restart", func() bool { return countAll(t, b, remote) == 20 })

	// A broken file is refused and the flow goes on.
	if err := os.WriteFile(cfg, []byte(body(one)+"refresh.topics.interval.seconds = soon\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out := call("POST", "/reload", "t0ken-42"); code != 400 || !strings.Contains(out, "refresh.topics.interval.seconds") {
		t.Errorf("reload of a bad file: %d %s", code, out)
	}
	// A good file takes effect: the second topic joins.
	if err := os.WriteFile(cfg, []byte(body(prefix+"-.*")), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out := call("POST", "/reload", "t0ken-42"); code != 200 {
		t.Fatalf("reload: %d %s", code, out)
	}
	waitFor(t, 60*time.Second, "the topic added by reload", func() bool { return countOrZero(t, b, src+"."+two) == 7 })
	p.stop()
	if got := countAll(t, b, remote); got != 20 {
		t.Errorf("target has %d records of %s, want 20 (no duplicates across pause, restart and reload)", got, one)
	}
	if strings.Contains(p.log.String(), "t0ken-42") {
		t.Error("the log shows the REST token")
	}
}
