package flow

import "github.com/kmirror/kmirror/internal/config"

// DataPath says which data path flow c will run, why when it is not
// passthrough, and its fetches per source broker; addOrigin is
// OriginHeaderFlows' answer for c. It is what `kmirror check` prints.
func DataPath(c *config.Flow, addOrigin bool) (passthrough bool, why string, fetches int) {
	passthrough, why = dataPathOf(c, addOrigin)
	return passthrough, why, fetchesOf(c, passthrough)
}
