package dashboard

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// checkGolden compares v, as indented JSON, with testdata/name.golden,
// or rewrites the file with -update.
func checkGolden(t *testing.T, name string, v any) {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got := string(b) + "\n"
	golden := filepath.Join("testdata", strings.ReplaceAll(name, " ", "-")+".golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (go test -run %s -update to write it)", err, t.Name())
	}
	if got != string(want) {
		t.Errorf("differs from %s (go test -run '%s' -update to rewrite it):\n%s", golden, t.Name(), got)
	}
}
