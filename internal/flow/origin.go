package flow

import (
	"github.com/kmirror/kmirror/internal/config"
)

// OriginHeaderFlows returns, by flow name, whether each of flows writes the
// provenance header. cfg gives every enabled flow, also those run elsewhere.
// config.ProvenanceKey turns it on or off; by default it is on exactly for
// flows that keep topic names (identity policy) and lie on a cycle of
// enabled flows, where records would otherwise loop.
func OriginHeaderFlows(cfg *config.Config, flows []*config.Flow) map[string]bool {
	next := make(map[string][]string)
	for _, f := range cfg.Flows {
		next[f.Source] = append(next[f.Source], f.Target)
	}
	out := make(map[string]bool, len(flows))
	for _, f := range flows {
		if f.Provenance != config.Auto {
			out[f.Name()] = f.Provenance == config.On
			continue
		}
		out[f.Name()] = keepsNames(f) && reaches(next, f.Target, f.Source)
	}
	return out
}

// keepsNames reports whether f's policy gives remote topics their source name.
func keepsNames(f *config.Flow) bool {
	return f.Policy.FormatRemoteTopic(f.Source, "t") == "t"
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
