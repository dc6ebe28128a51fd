package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/kmirror/kmirror/internal/testkafka"
)

// TestDashboardReadinessAgreesWithCutover runs kmirror on real brokers
// with two groups on the source, one idle and one with an active member,
// and checks that the dashboard's cutover panel (its JSON) and "kmirror
// cutover status" give each group the same verdict and the same reasons:
// the active one held back for its member on the source, the idle one
// ready; and, once the member has left, both ready on both.
func TestDashboardReadinessAgreesWithCutover(t *testing.T) {
	t.Parallel()
	cs := testkafka.Shared(t, 2)
	a, b := cs[0], cs[1]
	topic := testkafka.Topic(t, "agree")
	const parts = 4
	a.CreateTopic(t, topic, parts, nil)
	produceN(t, a, topic, parts, 10*parts, "agree")
	g := func(s string) string { return topic + "-" + s }
	offs := map[int32]int64{}
	for i := range int32(parts) {
		offs[i] = 5
	}
	commitOnA(t, a, g("idle"), topic, offs)
	commitOnA(t, a, g("active"), topic, offs)
	leave := member(t, a, g("active"), topic, false)
	defer leave()

	addr := freeAddr(t)
	const token = "agree-t0ken-7"
	src, dst := alias(t, "src"), alias(t, "dst")
	name := src + "->" + dst
	cfg := writeFile(t, "mm2.properties", mm2Config(src, dst, a, b,
		name+".topics = "+topic, "groups = "+topic+"-.*",
		"kmirror.rest.listener = "+addr, "kmirror.rest.token = "+token,
		"emit.checkpoints.interval.seconds = 1", "refresh.groups.interval.seconds = 1",
	))
	p := startKmirror(t, cfg)
	defer p.stop()

	type verdict struct {
		Ready   bool
		Reasons []string
	}
	dashboard := func() map[string]verdict {
		req, _ := http.NewRequest("GET", "http://"+addr+"/ui/api/overview", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
		if err != nil {
			return nil
		}
		defer resp.Body.Close()
		var ov struct {
			Groups []struct {
				Flow     string   `json:"flow"`
				Group    string   `json:"group"`
				Ready    bool     `json:"ready"`
				Blockers []string `json:"blockers"`
			} `json:"groups"`
		}
		if json.NewDecoder(resp.Body).Decode(&ov) != nil {
			return nil
		}
		out := map[string]verdict{}
		for _, gv := range ov.Groups {
			if gv.Flow == name {
				out[gv.Group] = verdict{gv.Ready, gv.Blockers}
			}
		}
		return out
	}
	status := func() map[string]verdict {
		out, _, code := cutoverRun(t, "status", cfg, "--flow="+name, "--window=0", "--verify=none", "--output=json")
		var st cutoverStatusJSON
		if (code != 0 && code != 3) || json.Unmarshal([]byte(out), &st) != nil {
			return nil
		}
		m := map[string]verdict{}
		for _, sg := range st.Groups {
			reasons := sg.Reasons
			if reasons == nil {
				reasons = []string{}
			}
			m[sg.Group] = verdict{sg.Ready, reasons}
		}
		return m
	}
	activeReason := fmt.Sprintf("active member(s) on %s (Stable): still consuming", src)
	var last string
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("last seen:\n%s", last)
		}
	})
	agree := func(wantActiveReady bool) func() bool {
		return func() bool {
			d, s := dashboard(), status()
			last = fmt.Sprintf("dashboard %+v\ncutover status %+v", d, s)
			for _, grp := range []string{g("idle"), g("active")} {
				dv, ok1 := d[grp]
				sv, ok2 := s[grp]
				if !ok1 || !ok2 || dv.Ready != sv.Ready || !slices.Equal(dv.Reasons, sv.Reasons) {
					return false
				}
			}
			if !d[g("idle")].Ready {
				return false
			}
			act := d[g("active")]
			if wantActiveReady {
				return act.Ready
			}
			return !act.Ready && slices.Equal(act.Reasons, []string{activeReason})
		}
	}
	waitFor(t, 90*time.Second, "dashboard and cutover status agree: "+g("active")+" held back by its member, "+g("idle")+" ready", agree(false))
	t.Logf("with a member: %s", last)

	leave()
	waitFor(t, 90*time.Second, "dashboard and cutover status agree: both groups ready once the member left", agree(true))
	t.Logf("member gone: %s", last)
}
