package rest

import (
	"io"
	"log/slog"
	"net/http"
	"testing"
)

// TestStartWithMount: routes a Mount adds are served beside the API's own
// and behind the same token.
func TestStartWithMount(t *testing.T) {
	mount := func(mux *http.ServeMux, guard func(http.HandlerFunc) http.HandlerFunc) {
		mux.HandleFunc("GET /extra", guard(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "extra") }))
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv, addr, err := StartWith(&fake{}, Listen{Name: "test", Addr: "127.0.0.1:0"}, "tok", log, mount)
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
