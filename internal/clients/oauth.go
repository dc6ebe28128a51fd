package clients

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
)

const oauthLoginModule = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"

// Option name prefixes of Kafka's unsecured OAUTHBEARER login handler.
const (
	unsecuredString    = "unsecuredLoginStringClaim_"
	unsecuredNumber    = "unsecuredLoginNumberClaim_"
	unsecuredList      = "unsecuredLoginListClaim_"
	unsecuredExtension = "unsecuredLoginExtension_"
)

// oauthBearer builds OAUTHBEARER as Kafka's default login callback handler
// does it: an unsecured JWS ({"alg":"none"}) made from the
// unsecuredLogin* options of OAuthBearerLoginModule, for brokers in their
// test mode. A fresh token is made for each connection. Token endpoints
// (sasl.oauthbearer.token.endpoint.url) are not supported.
func (b *builder) oauthBearer(j JAAS) (sasl.Mechanism, error) {
	if j.LoginModule != oauthLoginModule {
		return nil, fmt.Errorf("sasl.jaas.config: sasl.mechanism=OAUTHBEARER needs %s, not %s", oauthLoginModule, j.LoginModule)
	}
	for _, k := range []string{"sasl.login.callback.handler.class", "sasl.oauthbearer.token.endpoint.url"} {
		if v, ok := b.get(k); ok && strings.TrimSpace(v) != "" {
			return nil, fmt.Errorf("%s is not supported: kmirror makes only the unsecured OAUTHBEARER tokens of Kafka's default login handler", k)
		}
	}
	claims, ext, lifetime, err := unsecuredClaims(j)
	if err != nil {
		return nil, err
	}
	return oauth.Oauth(func(context.Context) (oauth.Auth, error) {
		tok, err := unsecuredToken(claims, lifetime, time.Now())
		return oauth.Auth{Token: tok, Extensions: ext}, err
	}), nil
}

// unsecuredClaims reads the unsecuredLogin* options: the token's claims
// (without iat and exp), the SASL extensions and the token lifetime.
func unsecuredClaims(j JAAS) (claims map[string]any, ext map[string]string, lifetime int64, err error) {
	claims, ext, lifetime = map[string]any{}, map[string]string{}, 3600
	principalClaim := "sub"
	for _, name := range j.OptionNames() {
		v, _ := j.Option(name)
		switch {
		case name == "unsecuredLoginPrincipalClaimName":
			principalClaim = v
		case name == "unsecuredLoginScopeClaimName":
			// Names the claim the broker reads scopes from; nothing to do.
		case name == "unsecuredLoginLifetimeSeconds":
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil || n <= 0 {
				return nil, nil, 0, fmt.Errorf("sasl.jaas.config: unsecuredLoginLifetimeSeconds is not a positive integer")
			}
			lifetime = n
		case strings.HasPrefix(name, unsecuredString):
			claims[strings.TrimPrefix(name, unsecuredString)] = v
		case strings.HasPrefix(name, unsecuredNumber):
			n, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				return nil, nil, 0, fmt.Errorf("sasl.jaas.config: option %s is not a number", name)
			}
			claims[strings.TrimPrefix(name, unsecuredNumber)] = n
		case strings.HasPrefix(name, unsecuredList):
			// The first character is the delimiter, as in Kafka.
			var list []string
			if len(v) > 1 {
				for _, e := range strings.Split(v[1:], v[:1]) {
					if e != "" {
						list = append(list, e)
					}
				}
			}
			claims[strings.TrimPrefix(name, unsecuredList)] = list
		case strings.HasPrefix(name, unsecuredExtension):
			ext[strings.TrimPrefix(name, unsecuredExtension)] = v
		}
	}
	for _, reserved := range []string{"iat", "exp"} {
		if _, ok := claims[reserved]; ok {
			return nil, nil, 0, fmt.Errorf("sasl.jaas.config: the %s claim is set by kmirror, not by an option", reserved)
		}
	}
	if p, ok := claims[principalClaim].(string); !ok || p == "" {
		return nil, nil, 0, fmt.Errorf("sasl.jaas.config: %s needs option %s%s (the principal)", oauthLoginModule, unsecuredString, principalClaim)
	}
	if len(ext) == 0 {
		ext = nil
	}
	return claims, ext, lifetime, nil
}

// unsecuredToken returns header.payload. with no signature (RFC 7515 with
// "alg":"none"), with iat and exp in seconds.
func unsecuredToken(claims map[string]any, lifetime int64, now time.Time) (string, error) {
	c := make(map[string]any, len(claims)+2)
	for k, v := range claims {
		c[k] = v
	}
	c["iat"] = now.Unix()
	c["exp"] = now.Unix() + lifetime
	payload, err := json.Marshal(c)
	if err != nil {
		return "", err
	}
	enc := base64.RawURLEncoding
	return enc.EncodeToString([]byte(`{"alg":"none"}`)) + "." + enc.EncodeToString(payload) + ".", nil
}
