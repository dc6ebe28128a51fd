package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/testkafka"
)

func freeAddr(t *testing.T) string { return testkafka.FreeAddr(t) }

// testRules returns the shipped alert rules with their durations cut for
// a test: every range [5m] or [10m] becomes [20s] and every "for:" 5s.
func testRules(t *testing.T) string {
	b, err := os.ReadFile("../deploy/prometheus/kmirror-alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	s := regexp.MustCompile(`\[(5|10)m\]`).ReplaceAllString(string(b), "[20s]")
	return regexp.MustCompile(`for: \S+`).ReplaceAllString(s, "for: 5s")
}

// promServer is Debian's Prometheus on 127.0.0.1, scraping target every
// second with the test rules.
type promServer struct{ addr string }

func startPrometheus(t *testing.T, target string) *promServer {
	t.Helper()
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatal("prometheus is missing: run scripts/setup (Debian package prometheus)")
	}
	dir := t.TempDir()
	rules := filepath.Join(dir, "rules.yml")
	if err := os.WriteFile(rules, []byte(testRules(t)), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [%q]
scrape_configs:
  - job_name: kmirror
    static_configs:
      - targets: [%q]
`, rules, target)
	cfgFile := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	ps := &promServer{addr: freeAddr(t)}
	startProc(t, "prometheus", exec.Command(bin, "--config.file="+cfgFile, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+ps.addr, "--log.level=warn"))
	waitFor(t, 60*time.Second, "Prometheus ready", func() bool {
		resp, err := http.Get("http://" + ps.addr + "/-/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	return ps
}

// query runs an instant PromQL query and returns its status and result.
func (ps *promServer) query(t *testing.T, q string) (string, []struct {
	Metric map[string]string `json:"metric"`
}) {
	resp, err := http.Get("http://" + ps.addr + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	if out.Status != "success" {
		return out.Status + ": " + out.Error, nil
	}
	return out.Status, out.Data.Result
}

type promAlert struct {
	Labels map[string]string `json:"labels"`
	State  string            `json:"state"`
}

func (ps *promServer) alerts(t *testing.T) []promAlert {
	resp, err := http.Get("http://" + ps.addr + "/api/v1/alerts")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Data struct {
			Alerts []promAlert `json:"alerts"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out.Data.Alerts
}

// firing returns the state of alert name for remote topic, "" if none.
func (ps *promServer) alertState(t *testing.T, name, topic string) string {
	for _, a := range ps.alerts(t) {
		if a.Labels["alertname"] == name && a.Labels["topic"] == topic {
			return a.State
		}
	}
	return ""
}

// TestPrometheusAlertsOnStall has a real Prometheus scrape kmirror with
// the shipped rules (durations cut, see testRules), checks the metrics the
// dashboard uses, then pauses the flow through the REST API while records
// keep arriving upstream and waits until KmirrorRecordCountNotGrowing
// fires for the stalled partition.
func TestPrometheusAlertsOnStall(t *testing.T) {
	t.Parallel()
	cs := testkafka.Shared(t, 2)
	a, b := cs[0], cs[1]
	topic := testkafka.Topic(t, "prom")
	a.CreateTopic(t, topic, 1, nil)
	src, dst := alias(t, "src"), alias(t, "dst")
	flow := src + "->" + dst
	metricsAddr, restAddr := freeAddr(t), freeAddr(t)
	cfg := writeFile(t, "mm2.properties", mm2Config(src, dst, a, b, flow+".topics = "+topic,
		"kmirror.rest.listener = "+restAddr, "kmirror.rest.token = pr0m"))
	remote := src + "." + topic
	// A remote topic kmirror creates waits a moment for the target to
	// host it, which KmirrorPartitionNotStarted (its "for" cut to 5 s
	// here) would see; this one exists from the start.
	b.CreateTopic(t, remote, 1, nil)
	startKmirror(t, "--metrics-addr", metricsAddr, cfg)

	// A producer writes 5 records a second until the test ends.
	pctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { stop(); wg.Wait() }()
	cl := a.Client(t)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; pctx.Err() == nil; i++ {
			cl.Produce(pctx, &kgo.Record{Topic: topic, Value: []byte(fmt.Sprint(i))}, nil)
			time.Sleep(200 * time.Millisecond)
		}
	}()

	ps := startPrometheus(t, metricsAddr)
	sel := fmt.Sprintf(`{topic=%q}`, remote)
	waitFor(t, 90*time.Second, "a record rate scraped", func() bool {
		_, r := ps.query(t, "kafka_connect_mirror_source_connector_record_rate"+sel+" > 0")
		return len(r) == 1
	})
	for _, q := range []string{
		"increase(kafka_connect_mirror_source_connector_record_count" + sel + "[20s]) > 0",
		"kafka_connect_mirror_source_connector_byte_rate" + sel + " > 0",
		"kafka_connect_mirror_source_connector_record_age_ms" + sel,
		"kafka_connect_mirror_source_connector_replication_latency_ms_avg" + sel,
		`go_goroutines{job="kmirror"}`,
		`process_resident_memory_bytes{job="kmirror"} > 0`,
	} {
		// A loaded machine delays scrapes: a window may briefly hold one
		// sample, so each query gets a while to answer one series.
		var status string
		var n int
		deadline := time.Now().Add(30 * time.Second)
		for {
			st, r := ps.query(t, q)
			status = st
			if n = len(r); status == "success" && n == 1 || time.Now().After(deadline) {
				break
			}
			time.Sleep(time.Second)
		}
		if status != "success" || n != 1 {
			t.Errorf("%s: %s, %d series, want 1", q, status, n)
		}
	}
	checkDashboard(t, ps)
	for _, a := range ps.alerts(t) {
		if a.Labels["source"] == src {
			t.Fatalf("%s is %s while records are copied", a.Labels["alertname"], a.State)
		}
	}

	req, _ := http.NewRequest("POST", "http://"+restAddr+"/flows/"+flow+"/pause", nil)
	req.Header.Set("Authorization", "Bearer pr0m")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("pause: %d", resp.StatusCode)
	}
	paused := time.Now()
	waitFor(t, 90*time.Second, "KmirrorRecordCountNotGrowing firing", func() bool {
		return ps.alertState(t, "KmirrorRecordCountNotGrowing", remote) == "firing"
	})
	t.Logf("alert firing %v after the pause", time.Since(paused).Round(time.Second))
}

// checkDashboard runs every query of the shipped Grafana dashboard, its
// variables matching everything: each must be valid PromQL.
func checkDashboard(t *testing.T, ps *promServer) {
	b, err := os.ReadFile("../deploy/grafana/kmirror-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("dashboard: %v", err)
	}
	n := 0
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			q := regexp.MustCompile(`\$\w+`).ReplaceAllString(tg.Expr, ".*")
			if status, _ := ps.query(t, q); status != "success" {
				t.Errorf("dashboard panel %q: %s: %s", p.Title, q, status)
			}
			n++
		}
	}
	if n < 10 {
		t.Errorf("dashboard has %d queries", n)
	}
}

// TestHTTPHardening checks on the kmirror binary that Go profiles need
// the REST token and are not on the metrics listener, and that a TLS
// certificate that cannot be loaded stops kmirror at start.
func TestHTTPHardening(t *testing.T) {
	t.Parallel()
	cs := testkafka.Shared(t, 2)
	a, b := cs[0], cs[1]
	topic := testkafka.Topic(t, "http")
	a.CreateTopic(t, topic, 1, nil)
	src, dst := alias(t, "src"), alias(t, "dst")

	t.Run("profiles behind the token", func(t *testing.T) {
		metricsAddr, restAddr := freeAddr(t), freeAddr(t)
		cfg := writeFile(t, "mm2.properties", mm2Config(src, dst, a, b, src+"->"+dst+".topics = "+topic,
			"kmirror.rest.listener = "+restAddr, "kmirror.rest.token = s3cret"))
		startKmirror(t, "--metrics-addr", metricsAddr, cfg)
		get := func(url, token string) int {
			req, _ := http.NewRequest("GET", url, nil)
			if token != "" {
				req.Header.Set("Authorization", "Bearer "+token)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return 0
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			return resp.StatusCode
		}
		waitFor(t, 60*time.Second, "REST API up", func() bool { return get("http://"+restAddr+"/health", "") == 200 })
		for _, c := range []struct {
			url, token string
			code       int
		}{
			{"http://" + restAddr + "/debug/pprof/heap", "", 401},
			{"http://" + restAddr + "/debug/pprof/heap", "wrong", 401},
			{"http://" + restAddr + "/debug/pprof/heap", "s3cret", 200},
			{"http://" + metricsAddr + "/debug/pprof/heap", "", 404},
			{"http://" + metricsAddr + "/metrics", "", 200},
		} {
			if got := get(c.url, c.token); got != c.code {
				t.Errorf("GET %s (token %q): %d, want %d", c.url, c.token, got, c.code)
			}
		}
	})

	t.Run("bad TLS certificate exits", func(t *testing.T) {
		bad := writeFile(t, "bad-cert.pem", "not a certificate\n")
		cfg := writeFile(t, "mm2.properties", mm2Config(src, dst, a, b, src+"->"+dst+".topics = "+topic,
			"kmirror.rest.listener = "+freeAddr(t), "kmirror.rest.token = s3cret",
			"kmirror.rest.tls.cert = "+bad, "kmirror.rest.tls.key = "+bad))
		p := startKmirror(t, cfg)
		select {
		case <-p.done:
		case <-time.After(60 * time.Second):
			t.Fatal("kmirror still runs with a REST certificate it cannot load")
		}
		if p.err == nil || !strings.Contains(p.log.String(), "loading TLS certificate") || !strings.Contains(p.log.String(), "bad-cert.pem") {
			t.Fatalf("exit %v; want a failure naming the certificate file:\n%s", p.err, p.log.String())
		}
	})
}

// TestByteCountIsValueBytes checks MM2's meaning of byte-count on both
// data paths: value bytes only, not keys, headers or batch framing.
// Passthrough estimates compressed batches between samples (every 5 s),
// so it is allowed 10 %.
func TestByteCountIsValueBytes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		extra []string
		slack float64
	}{
		{"re-encode", []string{reencodeAll}, 0},
		{"passthrough", nil, 0.1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cs := testkafka.Shared(t, 2)
			a, b := cs[0], cs[1]
			topic := testkafka.Topic(t, "bytes")
			a.CreateTopic(t, topic, 1, nil)
			var recs []*kgo.Record
			want := 0
			for i := range 500 {
				v := []byte(strings.Repeat(fmt.Sprint(i%10), 50+i%100))
				want += len(v)
				recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(fmt.Sprint("key-", i)), Value: v,
					Headers: []kgo.RecordHeader{{Key: "h", Value: []byte("header value")}}})
			}
			cl := a.Client(t, kgo.ProducerBatchCompression(kgo.ZstdCompression()))
			if err := cl.ProduceSync(ctx(t), recs...).FirstErr(); err != nil {
				t.Fatal(err)
			}
			src, dst := alias(t, "src"), alias(t, "dst")
			addr := freeAddr(t)
			cfg := writeFile(t, "mm2.properties", mm2Config(src, dst, a, b, append([]string{src + "->" + dst + ".topics = " + topic}, tc.extra...)...))
			startKmirror(t, "--metrics-addr", addr, cfg)
			count := fmt.Sprintf(`kafka_connect_mirror_source_connector_record_count{partition="0",source=%q,target=%q,topic=%q} 500`, src, dst, src+"."+topic)
			bytesRe := regexp.MustCompile(`kafka_connect_mirror_source_connector_byte_count\{[^}]*topic="` + regexp.QuoteMeta(src+"."+topic) + `"\} (\S+)`)
			var got float64
			waitFor(t, 60*time.Second, "500 records in the metrics", func() bool {
				resp, err := http.Get("http://" + addr + "/metrics")
				if err != nil {
					return false
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				m := bytesRe.FindSubmatch(body)
				if m == nil || !strings.Contains(string(body), count) {
					return false
				}
				fmt.Sscan(string(m[1]), &got)
				return true
			})
			if d := got - float64(want); d > tc.slack*float64(want) || -d > tc.slack*float64(want) {
				t.Errorf("byte_count %v, want %d value bytes (±%.0f%%)", got, want, tc.slack*100)
			}
			t.Logf("byte_count %v for %d value bytes", got, want)
		})
	}
}
