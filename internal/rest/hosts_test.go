package rest

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/kmirror/kmirror/internal/runner"
)

// TestDNSRebinding: without a token, a request whose Host or Origin is a
// name other than localhost, an IP address or one the operator allows is
// refused, even when the browser calls it same-origin; probes and
// requests with a token are not affected.
func TestDNSRebinding(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	tests := []struct {
		name, token, method, path, host, origin, site string
		code                                          int
	}{
		{"rebound name, same-origin POST", "", "POST", "/flows/A->B/pause", "evil.example:8080", "http://evil.example:8080", "same-origin", 421},
		{"rebound name, GET status", "", "GET", "/status", "evil.example", "", "", 421},
		{"rebound name, trailing dot", "", "GET", "/status", "evil.example.:80", "", "", 421},
		{"localhost name, evil Origin", "", "POST", "/flows/A->B/pause", "localhost:8080", "http://evil.example", "same-origin", 403},
		{"null Origin", "", "POST", "/flows/A->B/pause", "127.0.0.1:8080", "null", "", 403},
		{"localhost", "", "POST", "/flows/A->B/pause", "localhost:8080", "http://localhost:8080", "same-origin", 200},
		{"LOCALHOST without port", "", "GET", "/status", "LOCALHOST", "", "", 200},
		{"127.0.0.2", "", "POST", "/flows/A->B/pause", "127.0.0.2:8080", "", "", 200},
		{"::1", "", "POST", "/flows/A->B/pause", "[::1]:8080", "http://[::1]:8080", "same-origin", 200},
		{"an IP address", "", "GET", "/status", "10.1.2.3:8080", "", "", 200},
		{"an allowed name", "", "POST", "/flows/A->B/pause", "kmirror.internal:8080", "https://KMIRROR.internal", "same-origin", 200},
		{"health on any Host", "", "GET", "/health", "pod-name:8080", "", "", 200},
		{"ready on any Host", "", "GET", "/ready", "evil.example", "", "", 200},
		{"dashboard page on a rebound name", "", "GET", "/ui/", "evil.example", "", "", 421},
		{"token: any Host", "s3cret", "POST", "/flows/A->B/pause", "evil.example", "http://evil.example", "same-origin", 200},
		{"token: cross-site still refused", "s3cret", "POST", "/flows/A->B/pause", "localhost", "http://evil.example", "cross-site", 403},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &fake{flows: []runner.FlowStatus{{Name: "A->B", State: "running"}}}
			ui := Mount{Patterns: []string{"/ui/"}, Build: func(func(http.Handler) http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(200) })
			}}
			srv := httptest.NewServer(handler(c, NewToken(tt.token), []string{"kmirror.internal"}, log, ui))
			defer srv.Close()
			req, _ := http.NewRequest(tt.method, srv.URL+tt.path, nil)
			req.Host = tt.host
			if tt.origin != "" {
				req.Header.Set("Origin", tt.origin)
			}
			if tt.site != "" {
				req.Header.Set("Sec-Fetch-Site", tt.site)
			}
			if tt.token != "" {
				req.Header.Set("Authorization", "Bearer "+tt.token)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.code {
				t.Fatalf("%s %s Host %q Origin %q: %d %s, want %d", tt.method, tt.path, tt.host, tt.origin, resp.StatusCode, body, tt.code)
			}
			if pause := tt.method == "POST" && tt.code == 200; pause != (len(c.calls) == 1) {
				t.Errorf("calls %v", c.calls)
			}
		})
	}
}
