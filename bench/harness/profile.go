package harness

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Profile summarises a CPU profile of a kmirror run, taken from its
// /debug/pprof/profile endpoint (--metrics-addr) during the copy.
type Profile struct {
	File          string  `json:"file"`           // in the results folder
	Seconds       int     `json:"seconds"`        // profiling window asked for
	SampleSeconds float64 `json:"sample_seconds"` // CPU time in the samples
	// Categories split the flat CPU time by where it is spent, largest
	// first; they add up to SampleSeconds.
	Categories []Share `json:"categories"`
	Top        []Entry `json:"top"` // the largest flat entries
}

// Share is the flat CPU time of one category of functions.
type Share struct {
	Name    string  `json:"name"`
	Seconds float64 `json:"seconds"`
	Percent float64 `json:"percent"`
}

// Entry is one line of `go tool pprof -top`.
type Entry struct {
	Func    string  `json:"func"`
	Flat    float64 `json:"flat_seconds"`
	FlatPct float64 `json:"flat_percent"`
	Cum     float64 `json:"cum_seconds"`
	CumPct  float64 `json:"cum_percent"`
}

// profileToken is the REST token of the kmirror runs that are profiled.
const profileToken = "bench-profile"

// profiler fetches one CPU profile from a kmirror's pprof endpoint.
type profiler struct {
	addr     string // --metrics-addr: profiles of kmirror before they moved behind the REST token
	restAddr string // --rest-addr
	seconds  int
	path     string        // where the profile goes
	done     chan struct{} // closed once fetched or failed
	err      error         // of the fetch, once done is closed
}

// maxProfileSeconds is the longest profile kmirror's REST API takes
// (rest.MaxProfileSeconds); a longer one is asked for this long.
const maxProfileSeconds = 60

// start begins fetching the profile in the background.
func (p *profiler) start() {
	p.seconds = min(p.seconds, maxProfileSeconds)
	p.done = make(chan struct{})
	go func() {
		p.err = p.fetch()
		close(p.done)
	}()
}

func (p *profiler) fetch() error {
	c := &http.Client{Timeout: time.Duration(p.seconds)*time.Second + 30*time.Second}
	req, err := http.NewRequest("GET", fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", p.restAddr, p.seconds), nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+profileToken)
	resp, err := c.Do(req)
	if err == nil && resp.StatusCode == http.StatusNotFound { // a baseline binary of before
		resp.Body.Close()
		resp, err = c.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", p.addr, p.seconds))
	}
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("%s: %s", resp.Status, b)
	}
	f, err := os.Create(p.path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// wait blocks until the profile is fetched (or failed); the process must
// live until then.
func (p *profiler) wait() {
	if p.done != nil {
		<-p.done
	}
}

// summarize waits for the profile, writes `go tool pprof -top` beside it
// (.txt) and sums it up.
func (p *profiler) summarize(ctx context.Context) (*Profile, error) {
	if p.done == nil {
		return nil, fmt.Errorf("not taken: no record reached the target")
	}
	p.wait()
	if p.err != nil {
		return nil, p.err
	}
	return summarizeFile(ctx, p.path, p.seconds)
}

// summarizeFile writes `go tool pprof -top` of the profile at path beside
// it (.txt), every node included, and sums it up.
func summarizeFile(ctx context.Context, path string, seconds int) (*Profile, error) {
	out, err := exec.CommandContext(ctx, "go", "tool", "pprof", "-top", "-nodecount=100000",
		"-nodefraction=0", "-edgefraction=0", path).Output()
	if err != nil {
		return nil, fmt.Errorf("go tool pprof: %v", err)
	}
	txt := strings.TrimSuffix(path, ".pprof") + ".txt"
	if err := os.WriteFile(txt, out, 0o644); err != nil {
		return nil, err
	}
	entries, total, err := parseTop(string(out))
	if err != nil {
		return nil, err
	}
	prof := &Profile{File: filepath.Base(path), Seconds: seconds, SampleSeconds: total,
		Categories: categorize(entries, total)}
	prof.Top = entries[:min(len(entries), 15)]
	return prof, nil
}

// RefreshProfiles summarises again the profiles of res whose files are in
// dir, so that a change to the summary reaches saved results.
func RefreshProfiles(ctx context.Context, res *Results, dir string) error {
	for i, r := range res.Runs {
		if r.Profile == nil {
			continue
		}
		path := filepath.Join(dir, r.Profile.File)
		if _, err := os.Stat(path); err != nil {
			continue
		}
		p, err := summarizeFile(ctx, path, r.Profile.Seconds)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		res.Runs[i].Profile = p
	}
	return nil
}

// parseTop reads the output of `go tool pprof -top`: the total sample time
// and every entry, largest flat first.
func parseTop(s string) ([]Entry, float64, error) {
	var es []Entry
	total := -1.0
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		line := sc.Text()
		if _, rest, ok := strings.Cut(line, "Total samples = "); ok {
			d, err := pprofDuration(strings.Fields(rest)[0])
			if err != nil {
				return nil, 0, err
			}
			total = d
			continue
		}
		f := strings.Fields(line)
		if len(f) < 6 || !strings.HasSuffix(f[1], "%") || !strings.HasSuffix(f[4], "%") {
			continue
		}
		flat, err1 := pprofDuration(f[0])
		cum, err2 := pprofDuration(f[3])
		fp, err3 := strconv.ParseFloat(strings.TrimSuffix(f[1], "%"), 64)
		cp, err4 := strconv.ParseFloat(strings.TrimSuffix(f[4], "%"), 64)
		if err1 != nil || err2 != nil || err3 != nil || err4 != nil {
			continue // the header line
		}
		es = append(es, Entry{Func: strings.Join(f[5:], " "), Flat: flat, FlatPct: fp, Cum: cum, CumPct: cp})
	}
	if total < 0 {
		return nil, 0, fmt.Errorf("no total in pprof output")
	}
	return es, total, sc.Err()
}

// pprofDuration parses pprof's sample values: 1.20s, 340ms, 10us, 0.
func pprofDuration(v string) (float64, error) {
	if v == "0" {
		return 0, nil
	}
	v = strings.TrimSuffix(strings.TrimSuffix(v, "ins"), "rs") // 1.5mins, 2hrs
	d, err := time.ParseDuration(v)
	return d.Seconds(), err
}

// Categories of CPU time, in the report's order.
const (
	catDecompress = "decompress (lz4, zstd, ...)"
	catCompress   = "compress (lz4, zstd, ...)"
	catCRC        = "CRC-32C"
	catGC         = "GC and allocation"
	catMemmove    = "memmove (copying bytes)"
	catSyscall    = "system calls (network I/O)"
	catRuntime    = "scheduler and other runtime"
	catKgo        = "franz-go (kgo, kmsg)"
	catKmirror    = "kmirror (our code)"
	catOther      = "other"
)

// category names where a function's own (flat) CPU time goes.
func category(fn string) string {
	last := fn[strings.LastIndexByte(fn, '/')+1:]
	lower := strings.ToLower(last)
	codec := false
	for _, p := range []string{"github.com/pierrec/lz4", "github.com/klauspost/compress", "github.com/golang/snappy", "compress/"} {
		if strings.HasPrefix(fn, p) {
			codec = true
		}
	}
	gcWords := []string{"gc", "mark", "scan", "sweep", "malloc", "mspan", "mheap", "mcache", "mcentral", "heapbits",
		"greyobject", "findobject", "wbbuf", "barrier", "memclr", "typepointers", "nextfree", "newobject", "makeslice", "growslice", "spanclass"}
	switch {
	case codec:
		for _, w := range []string{"decompress", "uncompress", "decode", "decoder", "dec)", "reader", "inflate", "seqdec", "sequencedecs", "blockdec", "framedec"} {
			if strings.Contains(lower, w) {
				return catDecompress
			}
		}
		return catCompress
	case strings.HasPrefix(fn, "hash/crc32"):
		return catCRC
	case fn == "runtime.memmove":
		return catMemmove
	case strings.HasPrefix(fn, "runtime.") && containsAny(lower, gcWords):
		return catGC
	case strings.HasPrefix(fn, "syscall.") || strings.HasPrefix(fn, "internal/runtime/syscall") ||
		strings.HasPrefix(fn, "internal/poll.") || strings.HasPrefix(fn, "net."):
		return catSyscall
	case strings.HasPrefix(fn, "runtime.") || strings.HasPrefix(fn, "internal/runtime/"):
		return catRuntime
	case strings.HasPrefix(fn, "github.com/twmb/franz-go/"):
		return catKgo
	case strings.HasPrefix(fn, "github.com/kmirror/kmirror/"):
		return catKmirror
	}
	return catOther
}

func containsAny(s string, words []string) bool {
	for _, w := range words {
		if strings.Contains(s, w) {
			return true
		}
	}
	return false
}

// categorize sums the flat time of es by category, largest first.
func categorize(es []Entry, total float64) []Share {
	sums := map[string]float64{}
	for _, e := range es {
		sums[category(e.Func)] += e.Flat
	}
	var out []Share
	for name, v := range sums {
		out = append(out, Share{Name: name, Seconds: v, Percent: 100 * ratio(v, total)})
	}
	slices.SortFunc(out, func(a, b Share) int {
		if a.Seconds != b.Seconds {
			if a.Seconds > b.Seconds {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out
}
