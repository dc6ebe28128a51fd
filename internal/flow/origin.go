package flow

import (
	"strconv"

	"github.com/kmirror/kmirror/internal/config"
)

// ProvenanceKey turns the provenance header on or off for a flow; by
// default it is on exactly for flows that keep topic names (identity policy)
// and lie on a cycle of enabled flows, where records would otherwise loop.
const ProvenanceKey = "kmirror.provenance.header.enabled"

// OriginHeaderFlows returns, by flow name, whether each of flows writes the
// provenance header. cfg gives every enabled flow, also those run elsewhere.
func OriginHeaderFlows(cfg *config.Config, flows []*config.Flow) map[string]bool {
	next := make(map[string][]string)
	for _, f := range cfg.Flows {
		next[f.Source] = append(next[f.Source], f.Target)
	}
	out := make(map[string]bool, len(flows))
	for _, f := range flows {
		if v, ok := f.Settings[ProvenanceKey]; ok {
			b, _ := strconv.ParseBool(v)
			out[f.Name()] = b
			continue
		}
		out[f.Name()] = keepsNames(f) && reaches(next, f.Target, f.Source)
	}
	return out
}

// keepsNames reports whether f's policy gives remote topics their source name.
func keepsNames(f *config.Flow) bool {
	p, err := f.Policy()
	if err != nil {
		return false
	}
	return p.FormatRemoteTopic(f.Source, "t") == "t"
}

// reaches reports whether a path of flows leads from one alias to another.
func reaches(next map[string][]string, from, to string) bool {
	seen := map[string]bool{from: true}
	queue := []string{from}
	for len(queue) > 0 {
		c := queue[0]
		queue = queue[1:]
		if c == to {
			return true
		}
		for _, n := range next[c] {
			if !seen[n] {
				seen[n] = true
				queue = append(queue, n)
			}
		}
	}
	return false
}
