package clients

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strings"
)

// tlsConfig builds the TLS config for SSL and SASL_SSL from the ssl.* keys.
func (b *builder) tlsConfig() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}

	if v, ok := b.get("ssl.enabled.protocols"); ok {
		lo, hi, err := tlsVersions(v)
		if err != nil {
			return nil, err
		}
		cfg.MinVersion, cfg.MaxVersion = lo, hi
	}
	if v, ok := b.get("ssl.cipher.suites"); ok {
		suites, err := cipherSuites(v)
		if err != nil {
			return nil, err
		}
		cfg.CipherSuites = suites
	}

	roots, err := b.trustStore()
	if err != nil {
		return nil, err
	}
	cfg.RootCAs = roots

	cert, err := b.keyStore()
	if err != nil {
		return nil, err
	}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}

	algo, set := b.get("ssl.endpoint.identification.algorithm")
	if !set {
		algo = "https" // Java's default
	}
	switch strings.ToLower(strings.TrimSpace(algo)) {
	case "https":
		// crypto/tls checks the host name; kgo sets ServerName per broker.
	case "":
		// Skip the host name check but still verify the chain.
		cfg.InsecureSkipVerify = true
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			return verifyChain(cs.PeerCertificates, roots)
		}
	default:
		return nil, fmt.Errorf("ssl.endpoint.identification.algorithm: unsupported value %q (want https or empty)", algo)
	}
	return cfg, nil
}

// verifyChain verifies a server chain against roots (nil: system roots)
// without checking the host name.
func verifyChain(chain []*x509.Certificate, roots *x509.CertPool) error {
	if len(chain) == 0 {
		return errors.New("tls: server sent no certificate")
	}
	inter := x509.NewCertPool()
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	_, err := chain[0].Verify(x509.VerifyOptions{
		Roots:         roots,
		Intermediates: inter,
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	return err
}

func tlsVersions(list string) (lo, hi uint16, err error) {
	for _, p := range splitList(list) {
		var v uint16
		switch p {
		case "TLSv1":
			v = tls.VersionTLS10
		case "TLSv1.1":
			v = tls.VersionTLS11
		case "TLSv1.2":
			v = tls.VersionTLS12
		case "TLSv1.3":
			v = tls.VersionTLS13
		default:
			return 0, 0, fmt.Errorf("ssl.enabled.protocols: unsupported protocol %q", p)
		}
		if lo == 0 || v < lo {
			lo = v
		}
		if v > hi {
			hi = v
		}
	}
	if lo == 0 {
		return 0, 0, errors.New("ssl.enabled.protocols: empty")
	}
	return lo, hi, nil
}

// cipherSuites maps IANA suite names (which Java also uses) to Go's. TLS 1.3
// suites are accepted and dropped: Go always enables them all.
func cipherSuites(list string) ([]uint16, error) {
	known := map[string]uint16{}
	for _, s := range append(tls.CipherSuites(), tls.InsecureCipherSuites()...) {
		known[s.Name] = s.ID
	}
	var ids []uint16
	for _, name := range splitList(list) {
		switch name {
		case "TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256":
			continue
		}
		id, ok := known[name]
		if !ok {
			return nil, fmt.Errorf("ssl.cipher.suites: unsupported cipher suite %q", name)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// pemOnly explains that a store type cannot be read.
func pemOnly(key, typ string) error {
	return fmt.Errorf("%s=%s is not supported: convert the store to PEM and set %s=PEM", key, typ, key)
}

// trustStore returns the CA pool from ssl.truststore.*; nil means system roots.
func (b *builder) trustStore() (*x509.CertPool, error) {
	typ, typSet := b.get("ssl.truststore.type")
	typ = strings.ToUpper(strings.TrimSpace(typ))
	loc, hasLoc := b.get("ssl.truststore.location")
	certs, hasCerts := b.get("ssl.truststore.certificates")
	if hasLoc && strings.TrimSpace(loc) == "" {
		hasLoc = false
	}
	if hasCerts && strings.TrimSpace(certs) == "" {
		hasCerts = false
	}
	if typSet && typ != "PEM" && typ != "" && (hasLoc || hasCerts) {
		return nil, pemOnly("ssl.truststore.type", typ)
	}
	var data []byte
	switch {
	case hasLoc && hasCerts:
		return nil, errors.New("ssl.truststore.location and ssl.truststore.certificates are mutually exclusive")
	case hasCerts:
		data = []byte(certs)
	case hasLoc:
		var err error
		if data, err = os.ReadFile(loc); err != nil {
			return nil, fmt.Errorf("ssl.truststore.location: %w", err)
		}
		if !bytes.Contains(data, []byte("-----BEGIN")) {
			// Java's default store type is JKS; only PEM files can be read.
			return nil, fmt.Errorf("ssl.truststore.location: %s is not a PEM file: JKS and PKCS12 truststores are not supported, convert it to PEM and set ssl.truststore.type=PEM", loc)
		}
	default:
		return nil, nil
	}
	pool := x509.NewCertPool()
	n := 0
	for rest := data; ; {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%s: certificate %d: %w", b.trustKey(hasLoc), n+1, err)
		}
		pool.AddCert(c)
		n++
	}
	if n == 0 {
		return nil, fmt.Errorf("%s: no PEM certificates found", b.trustKey(hasLoc))
	}
	return pool, nil
}

func (b *builder) trustKey(fromFile bool) string {
	if fromFile {
		return "ssl.truststore.location"
	}
	return "ssl.truststore.certificates"
}

// keyStore returns the client certificate from ssl.keystore.*, or nil.
func (b *builder) keyStore() (*tls.Certificate, error) {
	typ, typSet := b.get("ssl.keystore.type")
	typ = strings.ToUpper(strings.TrimSpace(typ))
	loc, hasLoc := b.get("ssl.keystore.location")
	chain, hasChain := b.get("ssl.keystore.certificate.chain")
	key, hasKey := b.get("ssl.keystore.key")
	hasLoc = hasLoc && strings.TrimSpace(loc) != ""
	hasChain = hasChain && strings.TrimSpace(chain) != ""
	hasKey = hasKey && strings.TrimSpace(key) != ""
	if typSet && typ != "PEM" && typ != "" && (hasLoc || hasChain || hasKey) {
		return nil, pemOnly("ssl.keystore.type", typ)
	}
	var certPEM, keyPEM []byte
	where := "ssl.keystore.location"
	switch {
	case hasLoc && (hasChain || hasKey):
		return nil, errors.New("ssl.keystore.location and ssl.keystore.certificate.chain/ssl.keystore.key are mutually exclusive")
	case hasChain != hasKey:
		return nil, errors.New("ssl.keystore.certificate.chain and ssl.keystore.key must be set together")
	case hasChain:
		certPEM, keyPEM = []byte(chain), []byte(key)
		where = "ssl.keystore.certificate.chain/ssl.keystore.key"
	case hasLoc:
		data, err := os.ReadFile(loc)
		if err != nil {
			return nil, fmt.Errorf("ssl.keystore.location: %w", err)
		}
		if !bytes.Contains(data, []byte("-----BEGIN")) {
			return nil, fmt.Errorf("ssl.keystore.location: %s is not a PEM file: JKS and PKCS12 keystores are not supported, convert it to PEM and set ssl.keystore.type=PEM", loc)
		}
		certPEM, keyPEM = data, data
	default:
		return nil, nil
	}
	if err := checkKeyNotEncrypted(keyPEM); err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		// crypto/tls errors describe the problem, never the key bytes.
		return nil, fmt.Errorf("%s: invalid certificate or key: %w", where, err)
	}
	return &cert, nil
}

// checkKeyNotEncrypted rejects encrypted private keys, which the standard
// library cannot decrypt (ssl.key.password is therefore not supported).
func checkKeyNotEncrypted(data []byte) error {
	for rest := data; ; {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			return nil
		}
		if blk.Type == "ENCRYPTED PRIVATE KEY" || (strings.HasSuffix(blk.Type, "PRIVATE KEY") && blk.Headers["Proc-Type"] != "") {
			return errors.New("encrypted private keys are not supported (ssl.key.password): store the key unencrypted, e.g. openssl pkcs8 -topk8 -nocrypt")
		}
	}
}
