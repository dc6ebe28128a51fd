// Package version reports the kmirror release and the git commit it was built from.
package version

import (
	"runtime/debug"
)

// Version is the release, set at build time with
// -ldflags "-X github.com/kmirror/kmirror/internal/version.Version=v1.2.3".
var Version = "dev"

// Commit is the git commit, set at build time; when empty, the VCS stamp that
// the Go toolchain embeds is used.
var Commit = ""

// String returns "VERSION (COMMIT)".
func String() string {
	return Version + " (" + commit() + ")"
}

func commit() string {
	if Commit != "" {
		return Commit
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	rev, dirty := "", false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "unknown"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if dirty {
		rev += "-dirty"
	}
	return rev
}
