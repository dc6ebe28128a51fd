package config

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Error is a configuration problem tied to a key and its position.
type Error struct {
	File string
	Line int // 0 when the key is absent from the file
	Key  string
	Msg  string
}

// Error formats as FILE:LINE: KEY: MSG (FILE: KEY: MSG when Line is 0).
func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s: %s", e.File, e.Line, e.Key, e.Msg)
	}
	return fmt.Sprintf("%s: %s: %s", e.File, e.Key, e.Msg)
}

// errorList collects distinct errors.
type errorList struct {
	errs []*Error
	seen map[string]bool
}

func (l *errorList) add(e *Error) {
	if l.seen == nil {
		l.seen = map[string]bool{}
	}
	s := e.Error()
	if l.seen[s] {
		return
	}
	l.seen[s] = true
	l.errs = append(l.errs, e)
}

// err returns the collected errors sorted by line, joined, or nil.
func (l *errorList) err() error {
	if len(l.errs) == 0 {
		return nil
	}
	sort.SliceStable(l.errs, func(i, j int) bool {
		a, b := l.errs[i], l.errs[j]
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Key < b.Key
	})
	errs := make([]error, len(l.errs))
	for i, e := range l.errs {
		errs[i] = e
	}
	return errors.Join(errs...)
}

const redacted = "[hidden]"

// sensitiveParts are substrings of key names whose values must never be
// printed.
var sensitiveParts = []string{
	"password",
	"secret",
	"sasl.jaas.config",
	"ssl.keystore.key",
	"ssl.key.password",
	"credential",
	"private.key",
	"basic.auth.user.info",
	"api.key",
	"apikey",
	"access.key",
	"token.value",
	"rest.token", // kmirror.rest.token
}

// IsSensitive reports whether key (with any cluster, flow or client prefix)
// holds a secret: passwords, JAAS configs, private keys and the like.
func IsSensitive(key string) bool {
	k := strings.ToLower(key)
	for _, s := range sensitiveParts {
		if strings.Contains(k, s) {
			return true
		}
	}
	return false
}

// Redact returns value, or "[hidden]" if key is sensitive.
func Redact(key, value string) string {
	if IsSensitive(key) {
		return redacted
	}
	return value
}
