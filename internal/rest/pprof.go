package rest

import (
	"math"
	"net/http"
	"net/http/pprof"
	"strconv"
)

// MaxProfileSeconds is the longest profile or trace the API takes:
// /debug/pprof/profile, /debug/pprof/trace and the delta profiles
// (/debug/pprof/heap?seconds=N ...) answer 400 to a seconds parameter
// that is not a number above 0 and at most this.
const MaxProfileSeconds = 60

// profiles serves Go's profiles on mux behind guard, with seconds capped.
func profiles(mux *http.ServeMux, guard func(http.HandlerFunc) http.HandlerFunc) {
	for pattern, h := range map[string]http.HandlerFunc{
		"GET /debug/pprof/":        pprof.Index,
		"GET /debug/pprof/cmdline": pprof.Cmdline,
		"GET /debug/pprof/profile": pprof.Profile,
		"GET /debug/pprof/symbol":  pprof.Symbol,
		"GET /debug/pprof/trace":   pprof.Trace,
	} {
		mux.HandleFunc(pattern, guard(capSeconds(h)))
	}
}

// capSeconds refuses a seconds parameter beyond MaxProfileSeconds, which
// pprof would take as it is (and multiply into an overflowing duration).
func capSeconds(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if v := r.URL.Query().Get("seconds"); v != "" {
			// Trace takes fractions of a second; the others whole ones
			// (pprof checks that).
			n, err := strconv.ParseFloat(v, 64)
			if err != nil || math.IsNaN(n) || n <= 0 || n > MaxProfileSeconds {
				writeJSON(w, http.StatusBadRequest, errorBody{"seconds must be a number above 0 and at most " + strconv.Itoa(MaxProfileSeconds)})
				return
			}
		}
		h(w, r)
	}
}
