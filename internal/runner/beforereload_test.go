package runner

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/kmirror/kmirror/internal/config"
)

// TestBeforeReload: BeforeReload sees the file Reload read, and its error
// refuses the reload: Reload returns it and the configuration stays.
func TestBeforeReload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mm2.properties")
	write := func(token string) {
		body := "clusters = A, B\nA.bootstrap.servers = 127.0.0.1:1\nB.bootstrap.servers = 127.0.0.1:2\nA->B.enabled = true\nkmirror.rest.token = " + token + "\n"
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("first")
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg, err := Load(path, nil, log)
	if err != nil {
		t.Fatal(err)
	}
	r := New(path, cfg, nil, nil, log)
	refuse := errors.New("kmirror.rest.token: refused")
	var seen string
	r.BeforeReload = func(c *config.Config) error { seen = c.REST.Token; return refuse }
	write("second")
	if err := r.Reload(); !errors.Is(err, refuse) {
		t.Errorf("Reload = %v, want BeforeReload's error", err)
	}
	if seen != "second" {
		t.Errorf("BeforeReload saw token %q, want the file's new one", seen)
	}
	if r.Config() != cfg {
		t.Error("a refused reload replaced the configuration")
	}
}
