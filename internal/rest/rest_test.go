package rest

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/kmirror/kmirror/internal/datapath"
	"github.com/kmirror/kmirror/internal/runner"
)

// fake is a Control that records what it was asked.
type fake struct {
	flows  []runner.FlowStatus
	calls  []string
	reload error
}

func (f *fake) Status() []runner.FlowStatus { return f.flows }
func (f *fake) Pause(n string) error        { return f.do("pause " + n) }
func (f *fake) Resume(n string) error       { return f.do("resume " + n) }
func (f *fake) Restart(n string) error      { return f.do("restart " + n) }
func (f *fake) Reload() error               { f.calls = append(f.calls, "reload"); return f.reload }

func (f *fake) do(call string) error {
	for _, fl := range f.flows {
		if strings.HasSuffix(call, " "+fl.Name) {
			f.calls = append(f.calls, call)
			return nil
		}
	}
	return fmt.Errorf("%w %q", runner.ErrUnknownFlow, strings.SplitN(call, " ", 2)[1])
}

func TestAPI(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	tests := []struct {
		name, method, path, token string
		flows                     []runner.FlowStatus
		reloadErr                 error
		code                      int
		body, call                string
	}{
		{"health needs no token", "GET", "/health", "", nil, nil, 200, `"ok"`, ""},
		{"ready when all run", "GET", "/ready", "", []runner.FlowStatus{{Name: "A->B", State: "running"}}, nil, 200, "ready", ""},
		{"not ready when one failed", "GET", "/ready", "", []runner.FlowStatus{{Name: "A->B", State: "failed"}}, nil, 503, "not ready", ""},
		{"not ready when a partition stalled", "GET", "/ready", "", []runner.FlowStatus{{Name: "A->B", State: "running",
			Partitions: []datapath.PartitionStatus{{Topic: "t", State: datapath.Running}, {Topic: "t", Partition: 1, State: datapath.Stalled}}}}, nil, 503, `"partitions_stopped_or_stalled": 1`, ""},
		{"not ready when a partition stopped", "GET", "/ready", "", []runner.FlowStatus{{Name: "A->B", State: "running",
			Partitions: []datapath.PartitionStatus{{Topic: "t", State: datapath.Stopped}}}}, nil, 503, "not ready", ""},
		{"ready while lagging", "GET", "/ready", "", []runner.FlowStatus{{Name: "A->B", State: "running",
			Partitions: []datapath.PartitionStatus{{Topic: "t", State: datapath.Lagging}}}}, nil, 200, "ready", ""},
		{"not ready while an exactly-once slot is not taken", "GET", "/ready", "", []runner.FlowStatus{{Name: "A->B", State: "running",
			Partitions: []datapath.PartitionStatus{{Topic: "t", State: datapath.Fencing, Error: "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"}}}}, nil, 503, "not ready", ""},
		{"ready while the target hosts a new partition", "GET", "/ready", "", []runner.FlowStatus{{Name: "A->B", State: "running",
			Partitions: []datapath.PartitionStatus{{Topic: "t", State: datapath.Waiting}}}}, nil, 200, "ready", ""},
		{"not ready while the progress topic is missing", "GET", "/ready", "", []runner.FlowStatus{{Name: "A->B", State: "running",
			Problem: "progress topic mm2-offsets.A.internal is missing on the target"}}, nil, 503, "mm2-offsets.A.internal is missing", ""},
		{"not ready when the remote topic cannot be created", "GET", "/ready", "", []runner.FlowStatus{{Name: "A->B", State: "running",
			Partitions: []datapath.PartitionStatus{{Topic: "t", State: datapath.Waiting, Error: "cannot create the remote topic: POLICY_VIOLATION"}}}}, nil, 503, "not ready", ""},
		{"status without token", "GET", "/status", "", nil, nil, 401, "bearer token", ""},
		{"status with wrong token", "GET", "/status", "nope", nil, nil, 401, "bearer token", ""},
		{"status", "GET", "/status", "s3cret", []runner.FlowStatus{{Name: "A->B", State: "running"}}, nil, 200, `"A->B"`, ""},
		{"one flow", "GET", "/flows/A->B", "s3cret", []runner.FlowStatus{{Name: "A->B", State: "paused"}}, nil, 200, `"paused"`, ""},
		{"unknown flow", "GET", "/flows/X->Y", "s3cret", nil, nil, 404, "unknown flow", ""},
		{"pause", "POST", "/flows/A->B/pause", "s3cret", []runner.FlowStatus{{Name: "A->B"}}, nil, 200, "pause", "pause A->B"},
		{"resume", "POST", "/flows/A->B/resume", "s3cret", []runner.FlowStatus{{Name: "A->B"}}, nil, 200, "resume", "resume A->B"},
		{"restart", "POST", "/flows/A->B/restart", "s3cret", []runner.FlowStatus{{Name: "A->B"}}, nil, 200, "restart", "restart A->B"},
		{"restart unknown", "POST", "/flows/Q->R/restart", "s3cret", nil, nil, 404, "unknown flow", ""},
		{"pause needs a token", "POST", "/flows/A->B/pause", "", []runner.FlowStatus{{Name: "A->B"}}, nil, 401, "bearer", ""},
		{"pause is POST only", "GET", "/flows/A->B/pause", "s3cret", []runner.FlowStatus{{Name: "A->B"}}, nil, 405, "", ""},
		{"Connect's connector API", "PUT", "/connectors/us-west-source/config", "", nil, nil, 501, "run kmirror connect WORKER-FILE", ""},
		{"Connect's connector list", "POST", "/connectors", "", nil, nil, 501, "A->B.enabled = true", ""},
		{"reload", "POST", "/reload", "s3cret", nil, nil, 200, "reload", "reload"},
		{"reload of a bad file", "POST", "/reload", "s3cret", nil, errors.New("mm2.properties:3: topics: bad regex"), 400, "mm2.properties:3", "reload"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &fake{flows: tt.flows, reload: tt.reloadErr}
			srv := httptest.NewServer(Handler(c, "s3cret", log))
			defer srv.Close()
			req, _ := http.NewRequest(tt.method, srv.URL+tt.path, nil)
			if tt.token != "" {
				req.Header.Set("Authorization", "Bearer "+tt.token)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.code || !strings.Contains(string(body), tt.body) {
				t.Errorf("%s %s: %d %s; want %d containing %q", tt.method, tt.path, resp.StatusCode, body, tt.code, tt.body)
			}
			if strings.Contains(string(body), "s3cret") {
				t.Errorf("response shows the token: %s", body)
			}
			if tt.call != "" && (len(c.calls) != 1 || c.calls[0] != tt.call) {
				t.Errorf("calls %v, want [%s]", c.calls, tt.call)
			}
			if tt.call == "" && len(c.calls) > 0 {
				t.Errorf("unexpected calls %v", c.calls)
			}
		})
	}
}

// TestCrossOrigin: a browser on another origin cannot change state, even
// when the API has no token; same-origin and non-browser clients can.
func TestCrossOrigin(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	tests := []struct {
		name, method, site, origin string
		code                       int
	}{
		{"curl (no browser headers)", "POST", "", "", 200},
		{"same origin page", "POST", "same-origin", "", 200},
		{"cross-site form post", "POST", "cross-site", "", 403},
		{"cross origin by Origin only", "POST", "", "http://evil.example", 403},
		{"cross-site read is allowed", "GET", "cross-site", "", 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &fake{flows: []runner.FlowStatus{{Name: "A->B"}}}
			srv := httptest.NewServer(Handler(c, "", log))
			defer srv.Close()
			path := "/flows/A->B/pause"
			if tt.method == "GET" {
				path = "/status"
			}
			req, _ := http.NewRequest(tt.method, srv.URL+path, nil)
			if tt.site != "" {
				req.Header.Set("Sec-Fetch-Site", tt.site)
			}
			if tt.origin != "" {
				req.Header.Set("Origin", tt.origin)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tt.code {
				t.Errorf("%s %s (Sec-Fetch-Site %q, Origin %q): %d, want %d", tt.method, path, tt.site, tt.origin, resp.StatusCode, tt.code)
			}
			if wantCall := tt.code == 200 && tt.method == "POST"; wantCall != (len(c.calls) == 1) {
				t.Errorf("calls %v", c.calls)
			}
		})
	}
}
