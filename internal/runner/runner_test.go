package runner

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/kmirror/kmirror/internal/config"
	"github.com/kmirror/kmirror/internal/metrics"
	"github.com/kmirror/kmirror/internal/testkafka"
)

func TestMain(m *testing.M) { testkafka.Main(m) }

// quiet is a logger that drops everything.
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// threeClusters is a file body with unreachable clusters A, B and C;
// extra lines are appended.
func threeClusters(extra ...string) string {
	body := "clusters = A, B, C\nA.bootstrap.servers = 127.0.0.1:1\nB.bootstrap.servers = 127.0.0.1:1\nC.bootstrap.servers = 127.0.0.1:1\n"
	return body + strings.Join(extra, "\n") + "\n"
}

// writeConfig writes body to a new file and returns its path.
func writeConfig(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "mm2.properties")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func parse(t *testing.T, body string) *config.Config {
	t.Helper()
	cfg, err := config.Parse("mm2.properties", []byte(body), nil)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func names(flows []*config.Flow) []string {
	var out []string
	for _, f := range flows {
		out = append(out, f.Name())
	}
	return out
}

func TestSelected(t *testing.T) {
	cfg := parse(t, threeClusters("A->B.enabled = true", "B->C.enabled = true", "C->B.enabled = true"))
	tests := []struct {
		name string
		only []string
		want []string
	}{
		{"all", nil, []string{"A->B", "B->C", "C->B"}},
		{"into B", []string{"B"}, []string{"A->B", "C->B"}},
		{"into C", []string{"C"}, []string{"B->C"}},
		{"into B and C", []string{"B", "C"}, []string{"A->B", "B->C", "C->B"}},
		{"into A: none", []string{"A"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := names(selected(cfg, tt.only)); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("selected(%q) = %q, want %q", tt.only, got, tt.want)
			}
		})
	}
}

func TestHeartbeatPairs(t *testing.T) {
	tests := []struct {
		name  string
		lines []string
		only  []string
		want  []string
	}{
		{"every disabled pair", []string{"A->B.enabled = true"}, nil,
			[]string{"A->C", "B->A", "B->C", "C->A", "C->B"}},
		{"enabled flows are left out", []string{"A->B.enabled = true", "B->A.enabled = true", "A->C.enabled = true"}, nil,
			[]string{"B->C", "C->A", "C->B"}},
		{"only pairs into --clusters", []string{"A->B.enabled = true"}, []string{"A"},
			[]string{"B->A", "C->A"}},
		{"heartbeats off everywhere", []string{"A->B.enabled = true", "emit.heartbeats.enabled = false"}, nil, nil},
		{"heartbeats off for one pair", []string{"A->B.enabled = true", "C->A.emit.heartbeats.enabled = false"}, []string{"A"},
			[]string{"B->A"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := parse(t, threeClusters(tt.lines...))
			if got := names(heartbeatPairs(cfg, tt.only, quiet)); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("heartbeatPairs = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestLoad(t *testing.T) {
	tests := []struct {
		name    string
		body    string // "" means no file
		only    []string
		want    []string // flows of a file that loads
		wantErr string
	}{
		{"one flow", threeClusters("A->B.enabled = true"), nil, []string{"A->B"}, ""},
		{"flow into --clusters", threeClusters("A->B.enabled = true"), []string{"B"}, []string{"A->B"}, ""},
		{"missing file", "", nil, nil, "no such file"},
		{"invalid file", threeClusters("A->B.enabled = maybe"), nil, nil, "A->B.enabled"},
		{"no flow enabled: heartbeats only, as MM2", threeClusters(), nil, nil, ""},
		{"no flow and no heartbeats", threeClusters("emit.heartbeats.enabled = false"), nil, nil, "enables no flow"},
		{"no flow into --clusters", threeClusters("A->B.enabled = true", "emit.heartbeats.enabled = false"), []string{"C"}, nil, "enables no flow"},
		{"unknown --clusters alias", threeClusters("A->B.enabled = true"), []string{"D"}, nil, `unknown cluster alias "D"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "missing.properties")
			if tt.body != "" {
				path = writeConfig(t, tt.body)
			}
			cfg, err := Load(path, tt.only, quiet)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Load error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := names(cfg.Flows); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("flows %q, want %q", got, tt.want)
			}
		})
	}
}

// TestUnknownFlow: the controls name flows the Runner runs; any other name
// is ErrUnknownFlow.
func TestUnknownFlow(t *testing.T) {
	path := writeConfig(t, threeClusters("A->B.enabled = true"))
	cfg, err := Load(path, nil, quiet)
	if err != nil {
		t.Fatal(err)
	}
	r := New(path, cfg, nil, metrics.New(), quiet)
	controls := []struct {
		name string
		fn   func(string) error
	}{{"Restart", r.Restart}, {"Pause", r.Pause}, {"Resume", r.Resume}}
	for _, c := range controls {
		for _, flow := range []string{"C->A", "A->B", "", "nonsense"} { // A->B is not started: Run was not called
			if err := c.fn(flow); !errors.Is(err, ErrUnknownFlow) || !strings.Contains(err.Error(), `"`+flow+`"`) {
				t.Errorf("%s(%q) = %v, want ErrUnknownFlow naming it", c.name, flow, err)
			}
		}
	}
	if st := r.Status(); len(st) != 0 {
		t.Errorf("Status before Run = %+v, want none", st)
	}
	if r.Config() != cfg {
		t.Error("Config is not the loaded configuration")
	}
}
