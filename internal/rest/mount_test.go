package rest

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestMount: routes a Mount adds are served beside the API's own
// and behind the same token.
func TestMount(t *testing.T) {
	mount := Mount{Patterns: []string{"GET /extra"}, Build: func(guard func(http.Handler) http.Handler) http.Handler {
		return guard(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "extra") }))
	}}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv, addr, err := Start(&fake{}, Listen{Name: "test", Addr: "127.0.0.1:0"}, "tok", log, mount)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	tests := []struct {
		path, token string
		code        int
	}{
		{"/extra", "", 401},
		{"/extra", "wrong", 401},
		{"/extra", "tok", 200},
		{"/status", "tok", 200},
		{"/health", "", 200},
	}
	for _, tc := range tests {
		req, _ := http.NewRequest("GET", "http://"+addr.String()+tc.path, nil)
		if tc.token != "" {
			req.Header.Set("Authorization", "Bearer "+tc.token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.code {
			t.Errorf("GET %s with %q: %d, want %d", tc.path, tc.token, resp.StatusCode, tc.code)
		}
	}
}

// TestConnectMount: a mount that serves Connect's /connectors replaces the
// answer that points kmirror run's users to kmirror connect.
func TestConnectMount(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, tc := range []struct {
		name   string
		mounts []Mount
		code   int
	}{
		{"kmirror run", nil, http.StatusNotImplemented},
		{"kmirror connect", []Mount{{Patterns: []string{"/connectors", "/connectors/"}, Build: func(func(http.Handler) http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) })
		}}}, http.StatusTeapot},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(Handler(&fake{}, "", log, tc.mounts...))
			defer srv.Close()
			resp, err := http.Get(srv.URL + "/connectors")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.code {
				t.Errorf("GET /connectors: %d, want %d", resp.StatusCode, tc.code)
			}
		})
	}
}
