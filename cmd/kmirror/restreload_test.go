package main

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/kmirror/kmirror/internal/config"
	"github.com/kmirror/kmirror/internal/rest"
)

// TestRESTReload: a reloaded kmirror.rest.token applies to the running API
// at once; one that would turn the token on or off refuses the reload
// naming the key; other kmirror.rest.* keys are named as waiting for a
// restart. No token reaches the log or an error.
func TestRESTReload(t *testing.T) {
	tests := []struct {
		name      string
		cur, next config.REST
		err, warn string // substrings; "" for none
		want      string // the token the API takes afterwards
	}{
		{"token changed", config.REST{Token: "tok-A"}, config.REST{Token: "tok-B"}, "", "", "tok-B"},
		{"token unchanged", config.REST{Token: "tok-A"}, config.REST{Token: "tok-A"}, "", "", "tok-A"},
		{"token removed", config.REST{Token: "tok-A"}, config.REST{}, "kmirror.rest.token: not set any more", "", "tok-A"},
		{"token removed for auth none", config.REST{Token: "tok-A"}, config.REST{Open: true}, "kmirror.rest.token: turning the REST API's token on or off takes a restart", "", "tok-A"},
		{"token added to an open API", config.REST{Open: true}, config.REST{Open: true, Token: "tok-B"}, "kmirror.rest.token: turning", "", ""},
		{"listener and TLS changed", config.REST{Token: "tok-A", Listener: "127.0.0.1:1"}, config.REST{Token: "tok-A", Listener: "127.0.0.1:2", TLSCert: "c.pem", TLSKey: "k.pem"},
			"", "kmirror.rest.listener, kmirror.rest.tls.cert, kmirror.rest.tls.key", "tok-A"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(restTokenEnv, "")
			var buf bytes.Buffer
			tok := rest.NewToken(tc.cur.Token)
			err := restReload(tc.cur, tok, slog.New(slog.NewTextHandler(&buf, nil)))(&config.Config{REST: tc.next})
			if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
				t.Errorf("err = %v, want %q", err, tc.err)
			}
			if tc.warn != "" && !strings.Contains(buf.String(), tc.warn) {
				t.Errorf("log %q, want a warning naming %s", buf.String(), tc.warn)
			}
			if !tok.Matches(tc.want) {
				t.Errorf("the API does not take %q", tc.want)
			}
			for _, secret := range []string{"tok-A", "tok-B"} {
				if strings.Contains(buf.String(), secret) || err != nil && strings.Contains(err.Error(), secret) {
					t.Errorf("a token shows: log %q, err %v", buf.String(), err)
				}
			}
		})
	}
}
