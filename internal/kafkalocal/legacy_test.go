package kafkalocal

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestVersionPoms checks that every old version Up knows has a pom pinning
// exactly that version.
func TestVersionPoms(t *testing.T) {
	for _, v := range append(append([]string{}, ZooKeeperVersions...), KRaftVersions...) {
		pom, err := os.ReadFile(filepath.Join("..", "..", VersionPomPath(v)))
		if err != nil {
			t.Errorf("version %s: %v", v, err)
			continue
		}
		if got := pomVersion(pom); got != v {
			t.Errorf("%s pins %q, want %q", VersionPomPath(v), got, v)
		}
	}
}

// TestUnknownVersionRefused: an unknown version is an error naming it,
// before Maven or a JVM runs.
func TestUnknownVersionRefused(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"0.10.2.2", "5.0.0", "latest"} {
		if _, err := ResolveVersionLibs(context.Background(), root, v, nil); err == nil || !strings.Contains(err.Error(), `"`+v+`"`) {
			t.Errorf("ResolveVersionLibs(%q): %v, want an error naming it", v, err)
		}
		if _, err := Up(context.Background(), Options{Libs: t.TempDir(), Dir: t.TempDir(), Version: v}); err == nil || !strings.Contains(err.Error(), `"`+v+`"`) {
			t.Errorf("Up(Version %q): %v, want an error naming it", v, err)
		}
	}
}
