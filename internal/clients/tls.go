package clients

import (
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

// trustStore returns the CA pool from ssl.truststore.*; nil means system
// roots. The store type defaults to JKS as in Java; a JKS or PKCS12 file is
// read whichever of the two types is set, and a PEM file also when no type
// is set.
func (b *builder) trustStore() (*x509.CertPool, error) {
	typ, _ := b.get("ssl.truststore.type")
	typ = strings.ToUpper(strings.TrimSpace(typ))
	loc, hasLoc := b.get("ssl.truststore.location")
	certs, hasCerts := b.get("ssl.truststore.certificates")
	pw, _ := b.get("ssl.truststore.password")
	hasLoc = hasLoc && strings.TrimSpace(loc) != ""
	hasCerts = hasCerts && strings.TrimSpace(certs) != ""
	if err := storeType("ssl.truststore.type", typ); err != nil && (hasLoc || hasCerts) {
		return nil, err
	}
	var data []byte
	switch {
	case hasLoc && hasCerts:
		return nil, errors.New("ssl.truststore.location and ssl.truststore.certificates are mutually exclusive")
	case hasCerts:
		if typ != "" && typ != "PEM" {
			return nil, fmt.Errorf("ssl.truststore.certificates needs ssl.truststore.type=PEM, not %s", typ)
		}
		data = []byte(certs)
	case hasLoc:
		var err error
		if data, err = os.ReadFile(loc); err != nil {
			return nil, fmt.Errorf("ssl.truststore.location: %w", err)
		}
		f := sniffStore(data)
		switch {
		case typ == "PEM" && f != formatPEM:
			return nil, fmt.Errorf("ssl.truststore.location: %s is not a PEM file but ssl.truststore.type=PEM", loc)
		case typ == "" && f == formatPEM:
			// A PEM file without a type: read it rather than fail.
		case typ != "PEM":
			if err := binaryFormat("ssl.truststore.location", loc, typ, f); err != nil {
				return nil, err
			}
			list, err := storeTrust(loc, pw, data, f)
			if err != nil {
				return nil, err
			}
			pool := x509.NewCertPool()
			for _, c := range list {
				pool.AddCert(c)
			}
			return pool, nil
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

// keyStore returns the client certificate from ssl.keystore.*, or nil. The
// type defaults to JKS as for the trust store; ssl.key.password decrypts
// the key (a JKS entry's, or an encrypted PKCS#8 PEM key) and defaults to
// ssl.keystore.password for JKS and PKCS12 stores.
func (b *builder) keyStore() (*tls.Certificate, error) {
	typ, _ := b.get("ssl.keystore.type")
	typ = strings.ToUpper(strings.TrimSpace(typ))
	loc, hasLoc := b.get("ssl.keystore.location")
	chain, hasChain := b.get("ssl.keystore.certificate.chain")
	key, hasKey := b.get("ssl.keystore.key")
	storePw, _ := b.get("ssl.keystore.password")
	keyPw, keyPwSet := b.get("ssl.key.password")
	hasLoc = hasLoc && strings.TrimSpace(loc) != ""
	hasChain = hasChain && strings.TrimSpace(chain) != ""
	hasKey = hasKey && strings.TrimSpace(key) != ""
	if err := storeType("ssl.keystore.type", typ); err != nil && (hasLoc || hasChain || hasKey) {
		return nil, err
	}
	var certPEM, keyPEM []byte
	where := "ssl.keystore.location"
	switch {
	case hasLoc && (hasChain || hasKey):
		return nil, errors.New("ssl.keystore.location and ssl.keystore.certificate.chain/ssl.keystore.key are mutually exclusive")
	case hasChain != hasKey:
		return nil, errors.New("ssl.keystore.certificate.chain and ssl.keystore.key must be set together")
	case hasChain:
		if typ != "" && typ != "PEM" {
			return nil, fmt.Errorf("ssl.keystore.certificate.chain and ssl.keystore.key need ssl.keystore.type=PEM, not %s", typ)
		}
		certPEM, keyPEM = []byte(chain), []byte(key)
		where = "ssl.keystore.certificate.chain/ssl.keystore.key"
	case hasLoc:
		data, err := os.ReadFile(loc)
		if err != nil {
			return nil, fmt.Errorf("ssl.keystore.location: %w", err)
		}
		f := sniffStore(data)
		switch {
		case typ == "PEM" && f != formatPEM:
			return nil, fmt.Errorf("ssl.keystore.location: %s is not a PEM file but ssl.keystore.type=PEM", loc)
		case typ == "" && f == formatPEM, typ == "PEM":
			certPEM, keyPEM = data, data
		default:
			if err := binaryFormat("ssl.keystore.location", loc, typ, f); err != nil {
				return nil, err
			}
			if certPEM, keyPEM, err = storeKeyPair(loc, storePw, keyPw, keyPwSet, data, f); err != nil {
				return nil, err
			}
		}
	default:
		return nil, nil
	}
	keyPEM, err := decryptPEMKey(keyPEM, keyPw, keyPwSet)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		// crypto/tls errors describe the problem, never the key bytes.
		return nil, fmt.Errorf("%s: invalid certificate or key: %w", where, err)
	}
	return &cert, nil
}

// decryptPEMKey replaces an encrypted PKCS#8 key in PEM data by the
// decrypted one, using ssl.key.password. Legacy OpenSSL encryption
// ("Proc-Type" headers) is refused, as Kafka refuses it.
func decryptPEMKey(data []byte, pw string, pwSet bool) ([]byte, error) {
	var out []byte
	for rest := data; ; {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			return out, nil
		}
		switch {
		case blk.Type == "ENCRYPTED PRIVATE KEY":
			if !pwSet {
				return nil, errors.New("the private key is encrypted: set ssl.key.password")
			}
			der, err := decryptPKCS8(blk.Bytes, pw)
			if err != nil {
				return nil, err
			}
			blk = &pem.Block{Type: "PRIVATE KEY", Bytes: der}
		case strings.HasSuffix(blk.Type, "PRIVATE KEY") && blk.Headers["Proc-Type"] != "":
			return nil, errors.New("legacy OpenSSL-encrypted keys are not supported: convert the key to encrypted PKCS#8 (openssl pkcs8 -topk8 -v2 aes-256-cbc)")
		}
		out = append(out, pem.EncodeToMemory(blk)...)
	}
}
