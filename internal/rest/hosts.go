package rest

import (
	"net"
	"net/http"
	"net/url"
	"strings"
)

// HostGuard protects an API without a token against DNS rebinding: a web
// page on a name the attacker controls, whose DNS answer then turns to
// 127.0.0.1 or the API's address, is the same origin as the API for the
// browser, so CrossOriginProtection lets its requests through (Sec-Fetch-Site:
// same-origin) and the browser reads the answers. Such requests carry the
// attacker's name in Host and Origin. HostGuard answers 421 to a Host and
// 403 to an Origin whose host is not localhost, an IP address (a page
// served from an IP address cannot rebind it) or one of allowed (the
// operator's names, kmirror.rest.allowed.hosts; lower case). /health and
// /ready stay open to every Host, for probes that send the pod's name.
// With a token HostGuard does nothing: a browser never adds it by itself.
func HostGuard(token string, allowed []string, next http.Handler) http.Handler {
	if token != "" {
		return next
	}
	ok := func(host string) bool {
		host = strings.ToLower(strings.TrimSuffix(host, "."))
		if host == "localhost" || net.ParseIP(strings.Trim(host, "[]")) != nil {
			return true
		}
		for _, a := range allowed {
			if host == a {
				return true
			}
		}
		return false
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" || r.URL.Path == "/ready" {
			next.ServeHTTP(w, r)
			return
		}
		if !ok(hostOnly(r.Host)) {
			writeJSON(w, http.StatusMisdirectedRequest, errorBody{"Host " + quote(clip(r.Host)) + " is not served: an API without a token answers localhost, IP addresses and the names in kmirror.rest.allowed.hosts only (DNS rebinding)"})
			return
		}
		if o := r.Header.Get("Origin"); o != "" {
			u, err := url.Parse(o)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || !ok(u.Hostname()) {
				writeJSON(w, http.StatusForbidden, errorBody{"Origin " + quote(clip(o)) + " is not allowed: an API without a token accepts pages from localhost, IP addresses and the names in kmirror.rest.allowed.hosts only"})
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// hostOnly is the host of a Host header, without port or brackets.
func hostOnly(h string) string {
	if host, _, err := net.SplitHostPort(h); err == nil {
		return host
	}
	return strings.Trim(h, "[]")
}

func clip(s string) string {
	if len(s) > 100 {
		return s[:100] + "..."
	}
	return s
}
