package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/kmirror/kmirror/internal/testkafka"
)

// TestDashboardReadiness runs kmirror on real brokers with a consumer
// group, group offset sync and heartbeats, and checks in headless
// Chromium what the dashboard shows of them: the group ready for a
// cutover once its offsets are translated and synced, not ready with the
// replication lag while the flow is paused behind a backlog, ready again
// once resumed; the partition table's state filter; the partitions API's
// paging; and the topology view's clusters and the flow between them, seen
// in the heartbeats.
func TestDashboardReadiness(t *testing.T) {
	t.Parallel()
	bctx := chromium(t)
	cs := testkafka.Shared(t, 2)
	a, b := cs[0], cs[1]
	topic := testkafka.Topic(t, "ready")
	const parts = 12
	a.CreateTopic(t, topic, parts, nil)
	produceN(t, a, topic, parts, 20*parts, "first")

	addr := freeAddr(t)
	const token = "ready-t0ken-3"
	src, dst := alias(t, "src"), alias(t, "dst")
	name := src + "->" + dst
	remote := src + "." + topic
	// dst->src emits heartbeats into the source cluster; src->dst copies
	// them to the target as <src>.heartbeats, which shows the flow in
	// the heartbeats.
	cfg := writeFile(t, "mm2.properties", mm2Config(src, dst, a, b,
		name+".topics = "+topic,
		"kmirror.rest.listener = "+addr, "kmirror.rest.token = "+token,
		"emit.checkpoints.interval.seconds = 1", "refresh.groups.interval.seconds = 1",
		"sync.group.offsets.enabled = true", "sync.group.offsets.interval.seconds = 1",
		"emit.heartbeats.interval.seconds = 1",
		"heartbeats.replication.enabled = true",
		dst+"->"+src+".emit.heartbeats.enabled = true",
	))
	p := startKmirror(t, cfg)
	defer p.stop()
	waitFor(t, 60*time.Second, "first records", func() bool { return countOrZero(t, b, remote) == 20*parts })
	group := testkafka.Topic(t, "ready-group")
	offs := map[int32]int64{}
	for i := range int32(parts) {
		offs[i] = 10
	}
	commitOnA(t, a, group, topic, offs)

	rest := func(method, path string, out any) int {
		req, _ := http.NewRequest(method, "http://"+addr+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
		if err != nil {
			return 0
		}
		defer resp.Body.Close()
		if out != nil {
			json.NewDecoder(resp.Body).Decode(out)
		}
		return resp.StatusCode
	}
	c, cancel := context.WithTimeout(bctx, 30*time.Second)
	err := chromedp.Do(c, chromedp.Navigate("http://"+addr+"/ui/#token="+token))
	cancel()
	if err != nil {
		t.Fatalf("chromium: loading the dashboard: %v", err)
	}
	type groupRow struct {
		Found    bool
		Ready    string
		Text     string
		Topo     string // the edge src->dst: its class and title
		Clusters int    // of src and dst drawn
		Rows     int
		Info     string
		Paused   int // of the topic's rows
		Others   int // rows of any topic not paused
	}
	show := func() groupRow {
		return evalIn[groupRow](t, bctx, `(() => {
			const r = document.querySelector('#groups tr[data-group=`+strconv.Quote(group)+`]');
			const e = document.querySelector('#topology g.edge[data-source=`+strconv.Quote(src)+`][data-target=`+strconv.Quote(dst)+`]');
			const all = [...document.querySelectorAll("#partitions tbody tr[data-flow]")];
			const rows = all.filter(r => r.dataset.topic === `+strconv.Quote(topic)+`);
			return {Found: !!r, Ready: r ? r.dataset.ready : "", Text: r ? r.textContent : "",
				Topo: e ? e.getAttribute("class") + " | " + e.querySelector("title").textContent : "",
				Clusters: [`+strconv.Quote(src)+`, `+strconv.Quote(dst)+`].filter(a => document.querySelector('#topology g.cluster[data-alias="' + a + '"]')).length,
				Rows: rows.length, Info: document.getElementById("p-info").textContent,
				Paused: rows.filter(r => r.children[3].textContent === "paused").length,
				Others: all.filter(r => r.children[3].textContent !== "paused").length};
		})()`)
	}
	var s groupRow
	waitFor(t, 60*time.Second, "the group ready for a cutover: translated, copied, synced", func() bool {
		s = show()
		return s.Ready == "true" && strings.Contains(s.Text, "12/12 translated") && strings.Contains(s.Text, remote) && strings.Contains(s.Text, "at the checkpoints")
	})
	if s.Rows != parts {
		t.Errorf("partition table: %d rows of %s, %q; want %d", s.Rows, topic, s.Info, parts)
	}

	if code := rest("POST", "/flows/"+name+"/pause", nil); code != 200 {
		t.Fatalf("pause: %d", code)
	}
	produceN(t, a, topic, parts, 10*parts, "backlog")
	waitFor(t, 60*time.Second, "the group not ready: replication behind", func() bool {
		s = show()
		return s.Ready == "false" && strings.Contains(s.Text, "replication 120 records behind on 12 partitions")
	})
	// The state filter, on the page.
	evalIn[bool](t, bctx, `(() => { const s = document.getElementById("f-state"); s.value = "paused"; s.dispatchEvent(new Event("change")); return true })()`)
	waitFor(t, 20*time.Second, "the paused partitions", func() bool {
		s = show()
		return s.Rows == parts && s.Paused == parts && s.Others == 0
	})
	evalIn[bool](t, bctx, `(() => { const s = document.getElementById("f-state"); s.value = "running"; s.dispatchEvent(new Event("change")); return true })()`)
	waitFor(t, 20*time.Second, "no running partition while paused", func() bool {
		s = show()
		return s.Rows == 0 && strings.Contains(s.Info, "of 0")
	})
	evalIn[bool](t, bctx, `(() => { const s = document.getElementById("f-state"); s.value = ""; s.dispatchEvent(new Event("change")); return true })()`)
	// The API's paging, over the topic (the flow copies heartbeats too).
	var page struct {
		Total, Page, Pages int
		Partitions         []struct {
			Flow, Topic, State string
			Partition          int32
			Lag                int64
		}
	}
	if code := rest("GET", "/ui/api/partitions?flow="+name+"&q="+topic+"&sort=topic&size=5&page=2", &page); code != 200 || page.Total != parts || page.Pages != 3 ||
		len(page.Partitions) != 2 || page.Partitions[0].Partition != 10 || page.Partitions[0].Lag != 10 || page.Partitions[0].State != "paused" {
		t.Errorf("partitions page 3 of 5 a page: %d %+v", code, page)
	}

	if code := rest("POST", "/flows/"+name+"/resume", nil); code != 200 {
		t.Fatalf("resume: %d", code)
	}
	waitFor(t, 60*time.Second, "the group ready again once copied", func() bool {
		s = show()
		return s.Ready == "true"
	})
	waitFor(t, 60*time.Second, "the topology shows both clusters and the flow, seen in the heartbeats", func() bool {
		s = show()
		return s.Clusters == 2 && strings.Contains(s.Topo, "edge ok") && strings.Contains(s.Topo, "in the heartbeats, newest")
	})
	t.Logf("group row: %s; topology edge: %s", s.Text, s.Topo)
}
