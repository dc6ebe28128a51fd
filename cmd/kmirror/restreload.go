package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"

	"github.com/kmirror/kmirror/internal/config"
	"github.com/kmirror/kmirror/internal/rest"
)

// restReload returns kmirror run's check of a reloaded file's
// kmirror.rest.* keys (runner.BeforeReload), for an API serving tok (nil
// when the API is off) under the settings cur. A changed token applies at
// once: the old one is refused from the next request. A token that would
// appear on an open API, or go from a guarded one, refuses the reload
// naming the key. The listener, auth and TLS keys take effect at the next
// start; a reload that changes them says so.
func restReload(cur config.REST, tok *rest.Token, log *slog.Logger) func(*config.Config) error {
	var mu sync.Mutex // SIGHUP and POST /reload may come together
	return func(cfg *config.Config) error {
		mu.Lock()
		defer mu.Unlock()
		next := cfg.REST
		if tok != nil {
			token := next.Token
			if token == "" {
				token = os.Getenv(restTokenEnv)
			}
			if err := tok.Set(token); err != nil {
				if errors.Is(err, rest.ErrTokenOnOff) && token == "" && !next.Open {
					return fmt.Errorf("%s: not set any more, and the REST API needs a token (%s = none opens it, at a restart); nothing reloaded", config.RESTTokenKey, config.RESTAuthKey)
				}
				return fmt.Errorf("%s: %w; nothing reloaded", config.RESTTokenKey, err)
			}
			if next.Token != cur.Token {
				log.Info("REST token changed by the reload: the previous one is refused from now on")
			}
		}
		var later []string
		if next.Listener != cur.Listener {
			later = append(later, config.RESTListenerKey)
		}
		if next.Open != cur.Open {
			later = append(later, config.RESTAuthKey)
		}
		if next.TLSCert != cur.TLSCert {
			later = append(later, config.RESTCertKey)
		}
		if next.TLSKey != cur.TLSKey {
			later = append(later, config.RESTKeyKey)
		}
		if len(later) > 0 {
			log.Warn("changed REST API settings take effect when kmirror restarts", "keys", strings.Join(later, ", "))
		}
		cur = next
		return nil
	}
}
