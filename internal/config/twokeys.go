package config

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Two keys on one line. Articles and chat tools often lose line breaks, so
// a file reads
//
//	sasl.mechanism=PLAIN security.protocol=SASL_SSL
//
// java.util.Properties takes that as one key, sasl.mechanism, whose value
// is "PLAIN security.protocol=SASL_SSL": security.protocol is never set, the
// client speaks PLAINTEXT to a TLS listener and the user sees only a
// connection error. kmirror refuses such a line before it connects, naming
// file, line and both keys (never the values, which may be secrets).

// TwoKeysOnOneLine returns, for every key whose value (as written, before
// config providers) holds "KEY=" of a known Kafka client, Connect, MM2 or
// kmirror key after a blank, an *Error at the key's file and line; nil when
// there is none. Text inside double quotes, the options of a JAAS
// configuration and a note after " #" (see TrailingComment) are not looked
// at.
func (p *Properties) TwoKeysOnOneLine() error {
	errs := p.twoKeys()
	if len(errs) == 0 {
		return nil
	}
	out := make([]error, len(errs))
	for i, e := range errs {
		out[i] = e
	}
	return errors.Join(out...)
}

func (p *Properties) twoKeys() []*Error {
	var errs []*Error
	for _, k := range p.Keys() {
		e := p.m[k]
		if hidden := hiddenKey(k, e.raw); hidden != "" {
			errs = append(errs, &Error{File: e.file, Line: e.line, Key: k, Msg: twoKeysMsg(k, hidden)})
		}
	}
	sort.SliceStable(errs, func(i, j int) bool { return errs[i].Line < errs[j].Line })
	return errs
}

func twoKeysMsg(key, hidden string) string {
	return fmt.Sprintf("two keys on one line: the value holds %q, which a properties file reads as part of %s's value, "+
		"so %s is not set; put %s on a line of its own", hidden+"=", key, hidden, hidden)
}

// hiddenKey returns the first known key written as "KEY=" (or "KEY =")
// after a blank inside the value v of key, or "". In a JAAS configuration
// (sasl.jaas.config), whose options are NAME=VALUE too, only what follows
// the entry's closing ';' is looked at.
func hiddenKey(key, v string) string {
	toks := valueTokens(v)
	jaas := strings.HasSuffix(key, "sasl.jaas.config")
	for i := 1; i < len(toks); i++ {
		t := toks[i]
		if jaas {
			jaas = !strings.HasSuffix(t, ";")
			continue
		}
		if t == "#" || strings.HasPrefix(t, "#") {
			return "" // a note follows; TrailingComment warns about it
		}
		name, _, hasEq := strings.Cut(t, "=")
		if !hasEq {
			if i+1 >= len(toks) || !strings.HasPrefix(toks[i+1], "=") {
				continue
			}
		}
		if name != "" && IsKnownKey(name) {
			return name
		}
	}
	return ""
}

// valueTokens splits v at blanks outside double quotes.
func valueTokens(v string) []string {
	var toks []string
	var cur strings.Builder
	quoted := false
	flush := func() {
		if cur.Len() > 0 {
			toks = append(toks, cur.String())
			cur.Reset()
		}
	}
	for _, r := range v {
		switch {
		case r == '"':
			quoted = !quoted
			cur.WriteRune(r)
		case !quoted && (r == ' ' || r == '\t' || r == '\f' || r == '\n' || r == '\r'):
			flush()
		default:
			cur.WriteRune(r)
		}
	}
	flush()
	return toks
}

// IsKnownKey reports whether k names a Kafka client, Connect worker, MM2
// connector or kmirror setting, bare or behind MM2's prefixes (ALIAS.,
// SOURCE->TARGET., consumer., producer., admin. and their combinations).
func IsKnownKey(k string) bool {
	for range 4 {
		if isBareKnownKey(k) {
			return true
		}
		if i := strings.Index(k, "->"); i > 0 {
			_, rest, ok := strings.Cut(k[i:], ".")
			if !ok {
				return false
			}
			k = rest
			continue
		}
		_, rest, ok := strings.Cut(k, ".")
		if !ok {
			return false
		}
		k = rest
	}
	return false
}

func isBareKnownKey(k string) bool {
	return javaClientCommon[k] || javaProducerOnly[k] || javaConsumerOnly[k] || javaAdminOnly[k] ||
		connectorKeys[k] || flowOnlyKeys[k] || mm2Keys[k] || workerKeys[k] || removedKeys[k] ||
		deprecatedAliases[k] != "" || kmirrorFlowKeys[k] || kmirrorRESTKeys[k] ||
		strings.HasPrefix(k, providersKey+".")
}
