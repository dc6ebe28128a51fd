package clients

import (
	"encoding/base64"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestUnsecuredToken checks the token Kafka's unsecured login handler
// would make from the unsecuredLogin* options.
func TestUnsecuredToken(t *testing.T) {
	j, err := ParseJAAS(oauthLoginModule + ` required unsecuredLoginStringClaim_sub="alice"
		unsecuredLoginListClaim_scope="|read|write" unsecuredLoginNumberClaim_level="2"
		unsecuredLoginLifetimeSeconds="60" unsecuredLoginExtension_traceId="t1";`)
	if err != nil {
		t.Fatal(err)
	}
	claims, ext, lifetime, err := unsecuredClaims(j)
	if err != nil {
		t.Fatal(err)
	}
	if lifetime != 60 || !reflect.DeepEqual(ext, map[string]string{"traceId": "t1"}) {
		t.Errorf("lifetime %d, extensions %v", lifetime, ext)
	}
	tok, err := unsecuredToken(claims, lifetime, time.Unix(1_700_000_000, 0))
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(tok, ".")
	if len(parts) != 3 || parts[2] != "" {
		t.Fatalf("token %q: want header.payload. with an empty signature", tok)
	}
	for i, want := range []map[string]any{
		{"alg": "none"},
		{"sub": "alice", "scope": []any{"read", "write"}, "level": 2.0, "iat": 1.7e9, "exp": 1.7e9 + 60},
	} {
		raw, err := base64.RawURLEncoding.DecodeString(parts[i])
		if err != nil {
			t.Fatal(err)
		}
		var got map[string]any
		if err := json.Unmarshal(raw, &got); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("part %d = %v, want %v", i, got, want)
		}
	}
}
