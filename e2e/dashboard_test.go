package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kmirror/kmirror/internal/testkafka"
)

// screenshotEnv names a file the dashboard test saves its screenshot to;
// `make dashboard-screenshot` sets it to docs/img/dashboard.png.
const screenshotEnv = "KMIRROR_DASHBOARD_SCREENSHOT"

// TestDashboard loads kmirror's dashboard in headless Chromium against a
// running kmirror on real brokers and checks what the page shows after
// its JavaScript ran: the flow's name and state, the lag of a paused flow
// holding a backlog, that lag falling to 0 once the flow is resumed, a
// consumer group's checkpoint, the page's Pause and Resume buttons acting
// for real (GET /status), an upstream gap with its error, and the login
// form for a wrong token.
func TestDashboard(t *testing.T) {
	t.Parallel()
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal("chromium not found: scripts/setup installs Debian's chromium package")
	}
	cs := testkafka.Shared(t, 2)
	a, b := cs[0], cs[1]
	topic := testkafka.Topic(t, "dash")
	a.CreateTopic(t, topic, 2, nil)
	produceN(t, a, topic, 2, 200, "first")

	addr := freeAddr(t)
	const token = "dash-t0ken-7"
	src, dst := alias(t, "src"), alias(t, "dst")
	name := src + "->" + dst
	remote := src + "." + topic
	cfg := writeFile(t, "mm2.properties", mm2Config(src, dst, a, b,
		name+".topics = "+topic,
		"kmirror.rest.listener = "+addr, "kmirror.rest.token = "+token,
		"kmirror.partition.stall.timeout.ms = 4000",
		"emit.checkpoints.interval.seconds = 1", "refresh.groups.interval.seconds = 1",
		"offset.lag.max = 10",
	))
	p := startKmirror(t, cfg)
	defer p.stop()
	waitFor(t, 60*time.Second, "first records", func() bool { return countOrZero(t, b, remote) == 200 })
	group := testkafka.Topic(t, "dash-group")
	commitOnA(t, a, group, topic, map[int32]int64{0: 60, 1: 80})

	rest := func(method, path string) (int, map[string]any) {
		req, _ := http.NewRequest(method, "http://"+addr+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
		if err != nil {
			return 0, nil
		}
		defer resp.Body.Close()
		var out map[string]any
		json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}
	restState := func() string {
		_, f := rest("GET", "/flows/"+name)
		s, _ := f["state"].(string)
		return s
	}
	if code, _ := rest("POST", "/flows/"+name+"/pause"); code != 200 {
		t.Fatalf("pause: %d", code)
	}
	const backlog = 2000
	produceN(t, a, topic, 2, backlog, "backlog")

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium),
		chromedp.Flag("headless", "new"), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.WindowSize(1400, 1100))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancel()
	bctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	// Start the browser on bctx itself: a browser started under a
	// shorter context would close with it.
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	run := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		c, cancel := context.WithTimeout(bctx, 30*time.Second)
		defer cancel()
		if err := chromedp.Do(c, steps...); err != nil {
			t.Fatalf("chromium: %s: %v", what, err)
		}
	}
	// The token travels in the fragment, which the browser never sends.
	run("load the dashboard", chromedp.Navigate("http://"+addr+"/ui/#token="+token))

	type shown struct {
		Name, State, Lag, Rate, Button, URL, Groups, Gaps, Errors string
		Partitions                                                int
	}
	show := func() shown {
		js := `(() => {
			const r = [...document.querySelectorAll("#flows tbody tr")].find(r => r.dataset.flow === ` + strconv.Quote(name) + `);
			const text = q => r && r.querySelector(q) ? r.querySelector(q).textContent : "";
			return {Name: text(".name"), State: text(".state"), Lag: text(".lag"), Rate: text(".rate"), Button: text("button"), URL: location.href,
				Groups: document.querySelector("#groups tbody").textContent,
				Gaps: document.querySelector("#gaps tbody").textContent,
				Errors: document.querySelector("#errors tbody").textContent,
				Partitions: document.querySelectorAll("#partitions tbody tr[data-flow]").length};
		})()`
		c, cancel := context.WithTimeout(bctx, 10*time.Second)
		defer cancel()
		s, err := chromedp.Run(c, chromedp.Evaluate[shown](js))
		if err != nil {
			t.Fatalf("chromium: reading the page: %v", err)
		}
		return s
	}
	// click clicks the element css names, in one script: the page
	// re-renders its rows at every poll, so a node found by one DevTools
	// call can be gone by the next (chromedp.Click failed so at load 38).
	click := func(what, css string) {
		t.Helper()
		js := `(() => { const e = document.querySelector(` + strconv.Quote(css) + `); if (!e) return false; e.click(); return true; })()`
		waitFor(t, 20*time.Second, "the page to "+what, func() bool {
			c, cancel := context.WithTimeout(bctx, 10*time.Second)
			defer cancel()
			done, err := chromedp.Run(c, chromedp.Evaluate[bool](js))
			if err != nil {
				t.Fatalf("chromium: %s: %v", what, err)
			}
			return done
		})
	}
	number := func(text string) float64 {
		n, err := strconv.ParseFloat(strings.ReplaceAll(text, ",", ""), 64)
		if err != nil {
			return -1
		}
		return n
	}
	lagOf := func(s shown) int { return int(number(s.Lag)) }

	var s shown
	waitFor(t, 30*time.Second, "the page shows the paused flow with its backlog as lag", func() bool {
		s = show()
		return s.State == "paused" && lagOf(s) == backlog
	})
	if s.Name != name || s.Button != "Resume" || s.Partitions != 2 {
		t.Errorf("page shows flow %q, button %q, %d partition rows; want %q, Resume, 2", s.Name, s.Button, s.Partitions, name)
	}
	if strings.Contains(s.URL, token) {
		t.Errorf("the token stayed in the address bar: %s", s.URL)
	}
	waitFor(t, 30*time.Second, "the page shows the group's checkpoint", func() bool {
		s = show()
		return strings.Contains(s.Groups, group) && strings.Contains(s.Groups, remote)
	})

	if code, _ := rest("POST", "/flows/"+name+"/resume"); code != 200 {
		t.Fatalf("resume: %d", code)
	}
	seen := map[int]bool{}
	waitFor(t, 60*time.Second, "the page shows the lag falling to 0 on a running flow", func() bool {
		s = show()
		seen[lagOf(s)] = true
		return s.State == "running" && lagOf(s) == 0
	})
	t.Logf("lag values shown while copying: %v", seen)
	if got := countOrZero(t, b, remote); got != 200+backlog {
		t.Errorf("target holds %d records, want %d", got, 200+backlog)
	}
	// A trickle of records until the page shows a throughput: rates
	// come from two history samples (5 s apart) that saw records copied.
	trickled := 0
	waitFor(t, 40*time.Second, "the page shows records/s above 0", func() bool {
		produceN(t, a, topic, 2, 40, "trickle")
		trickled += 40
		time.Sleep(400 * time.Millisecond)
		s = show()
		return number(s.Rate) > 0
	})
	waitFor(t, 30*time.Second, "the trickle copied", func() bool { return countOrZero(t, b, remote) == 200+backlog+trickled })
	sctx, scancel := context.WithTimeout(bctx, 30*time.Second)
	png, err := chromedp.Run(sctx, chromedp.FullScreenshot(100))
	scancel()
	if err != nil {
		t.Fatalf("chromium: screenshot: %v", err)
	}
	out := os.Getenv(screenshotEnv)
	if out == "" {
		out = filepath.Join(t.TempDir(), "dashboard.png")
	}
	if err := os.WriteFile(out, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%d bytes)", out, len(png))

	click("click Pause", `#flows button.pause`)
	waitFor(t, 20*time.Second, "GET /status says paused after the page's Pause", func() bool { return restState() == "paused" })
	waitFor(t, 20*time.Second, "the page shows paused and offers Resume", func() bool {
		s = show()
		return s.State == "paused" && s.Button == "Resume"
	})

	// An upstream gap while paused: 30 new records on p0, of which
	// retention (DeleteRecords) takes 20 before kmirror copies them.
	produceN(t, a, topic, 1, 30, "lost")
	ends, err := a.Admin(t).ListEndOffsets(ctx(t), topic)
	if err != nil {
		t.Fatal(err)
	}
	end, _ := ends.Lookup(topic, 0)
	var del kadm.Offsets
	del.Add(kadm.Offset{Topic: topic, Partition: 0, At: end.Offset - 10})
	if _, err := a.Admin(t).DeleteRecords(ctx(t), del); err != nil {
		t.Fatal(err)
	}
	click("click Resume", `#flows button.resume`)
	waitFor(t, 20*time.Second, "GET /status says running after the page's Resume", func() bool { return restState() == "running" })
	waitFor(t, 30*time.Second, "the page shows the gap and its error", func() bool {
		s = show()
		return strings.Contains(s.Gaps, topic) && strings.Contains(s.Gaps, "20") && strings.Contains(s.Errors, "source records lost")
	})

	// A wrong token gets the login form and no data.
	run("load with a wrong token", chromedp.Navigate("http://"+addr+"/ui/#token=wrong"))
	waitFor(t, 10*time.Second, "the page asks for the token", func() bool {
		c, cancel := context.WithTimeout(bctx, 10*time.Second)
		defer cancel()
		got, err := chromedp.Run(c, chromedp.Evaluate[string](
			`document.getElementById("main").hidden && !document.getElementById("login").hidden ? document.getElementById("login-error").textContent : ""`))
		return err == nil && got == "wrong token"
	})
}
