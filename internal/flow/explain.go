package flow

import "github.com/kmirror/kmirror/internal/config"

// DataPath says how flow c's batches reach the target and its fetches per
// source broker; addOrigin is OriginHeaderFlows' answer for c. It is what
// `kmirror check` prints.
func DataPath(c *config.Flow, addOrigin bool) (Encoding, int) {
	return encodingOf(c, addOrigin), fetchesOf(c)
}
