package clients

import (
	"bytes"
	"crypto"
	"crypto/x509"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"fmt"

	"github.com/pavlo-v-chernykh/keystore-go/v4"
	"software.sslmate.com/src/go-pkcs12"
)

// storeFormat is the encoding of a key or trust store file, found from its
// first bytes (as Java's "keystore.type.compat" does for JKS and PKCS12).
type storeFormat int

const (
	formatUnknown storeFormat = iota
	formatPEM
	formatJKS
	formatJCEKS
	formatPKCS12
)

func (f storeFormat) String() string {
	switch f {
	case formatPEM:
		return "PEM"
	case formatJKS:
		return "JKS"
	case formatJCEKS:
		return "JCEKS"
	case formatPKCS12:
		return "PKCS12"
	}
	return "unknown"
}

func sniffStore(data []byte) storeFormat {
	switch {
	case len(data) >= 4 && binary.BigEndian.Uint32(data) == 0xfeedfeed:
		return formatJKS
	case len(data) >= 4 && binary.BigEndian.Uint32(data) == 0xcececece:
		return formatJCEKS
	case len(data) > 0 && data[0] == 0x30: // a DER SEQUENCE
		return formatPKCS12
	case bytes.Contains(data, []byte("-----BEGIN")):
		return formatPEM
	}
	return formatUnknown
}

// storeType checks a ssl.*store.type value; "" means Java's default, JKS.
func storeType(key, typ string) error {
	switch typ {
	case "", "JKS", "PKCS12", "PEM":
		return nil
	}
	return fmt.Errorf("%s=%s is not supported (want JKS, PKCS12 or PEM)", key, typ)
}

// binaryFormat checks that a store file of the given type (JKS, PKCS12 or
// unset) holds JKS or PKCS12 data; Java reads either for either type.
func binaryFormat(key, loc, typ string, f storeFormat) error {
	switch f {
	case formatJKS, formatPKCS12:
		return nil
	case formatPEM:
		return fmt.Errorf("%s: %s is a PEM file but %s=%s: set it to PEM", key, loc, typeKey(key), typ)
	case formatJCEKS:
		return fmt.Errorf("%s: %s is a JCEKS store, which is not supported: convert it to PKCS12 (keytool -importkeystore)", key, loc)
	}
	return fmt.Errorf("%s: %s is neither a JKS, a PKCS12 nor a PEM file", key, loc)
}

func typeKey(locKey string) string {
	if locKey == "ssl.keystore.location" {
		return "ssl.keystore.type"
	}
	return "ssl.truststore.type"
}

// jksPassword turns a Java password into the bytes keystore-go expects: it
// widens each byte to a UTF-16 unit, so only Latin-1 passwords can be used.
func jksPassword(key, pw string) ([]byte, error) {
	out := make([]byte, 0, len(pw))
	for _, r := range pw {
		if r > 0xff {
			return nil, fmt.Errorf("%s: JKS passwords with characters beyond Latin-1 are not supported; use a PKCS12 store", key)
		}
		out = append(out, byte(r))
	}
	return out, nil
}

// loadJKS reads a JKS store. A trust store without a password is read
// without its integrity check, as Java does; a key store needs one.
func loadJKS(loc, pwKey, pw string, data []byte) (keystore.KeyStore, error) {
	ks := keystore.New()
	noCheck := pw == "" && pwKey == "ssl.truststore.password"
	if pw == "" && !noCheck {
		return ks, fmt.Errorf("%s is required to read the JKS store %s", pwKey, loc)
	}
	p, err := jksPassword(pwKey, pw)
	if err != nil {
		return ks, err
	}
	err = ks.Load(bytes.NewReader(data), p)
	if noCheck && err != nil && err.Error() == "got invalid digest" {
		// keystore-go has read every entry before it checks the digest.
		err = nil
	}
	if err != nil {
		return ks, fmt.Errorf("%s: cannot read JKS store %s (wrong %s or damaged file): %w", typeLocation(pwKey), loc, pwKey, err)
	}
	return ks, nil
}

func typeLocation(pwKey string) string {
	if pwKey == "ssl.truststore.password" {
		return "ssl.truststore.location"
	}
	return "ssl.keystore.location"
}

// storeTrust returns the trusted certificate entries of a JKS or PKCS12
// trust store; like Java's PKIX trust manager it ignores key entries.
func storeTrust(loc, pw string, data []byte, f storeFormat) ([]*x509.Certificate, error) {
	const key = "ssl.truststore.location"
	var certs []*x509.Certificate
	if f == formatJKS {
		ks, err := loadJKS(loc, "ssl.truststore.password", pw, data)
		if err != nil {
			return nil, err
		}
		for _, alias := range ks.Aliases() {
			if !ks.IsTrustedCertificateEntry(alias) {
				continue
			}
			e, err := ks.GetTrustedCertificateEntry(alias)
			if err != nil {
				return nil, fmt.Errorf("%s: %s: entry %q: %w", key, loc, alias, err)
			}
			c, err := x509.ParseCertificate(e.Certificate.Content)
			if err != nil {
				return nil, fmt.Errorf("%s: %s: entry %q: %w", key, loc, alias, err)
			}
			certs = append(certs, c)
		}
	} else {
		var err error
		if certs, err = pkcs12.DecodeTrustStore(data, pw); err != nil {
			return nil, fmt.Errorf("%s: cannot read PKCS12 store %s: %w", key, loc, p12Err(err, "ssl.truststore.password"))
		}
	}
	if len(certs) == 0 {
		return nil, fmt.Errorf("%s: %s has no trusted certificate entries", key, loc)
	}
	return certs, nil
}

// p12Err names the password key when go-pkcs12 reports a wrong password.
func p12Err(err error, pwKey string) error {
	if errors.Is(err, pkcs12.ErrIncorrectPassword) || errors.Is(err, pkcs12.ErrDecryption) {
		return fmt.Errorf("wrong or missing %s", pwKey)
	}
	return err
}

// storeKeyPair returns a JKS or PKCS12 key store's only private key entry
// as PEM: the PKCS#8 key, then the certificate chain.
func storeKeyPair(loc, storePw, keyPw string, keyPwSet bool, data []byte, f storeFormat) (certPEM, keyPEM []byte, err error) {
	const key = "ssl.keystore.location"
	if storePw == "" {
		return nil, nil, fmt.Errorf("ssl.keystore.password is required to read the key store %s", loc)
	}
	if !keyPwSet {
		keyPw = storePw // Kafka's default
	}
	var chain [][]byte
	var pkcs8 []byte
	if f == formatJKS {
		ks, err := loadJKS(loc, "ssl.keystore.password", storePw, data)
		if err != nil {
			return nil, nil, err
		}
		var aliases []string
		for _, a := range ks.Aliases() {
			if ks.IsPrivateKeyEntry(a) {
				aliases = append(aliases, a)
			}
		}
		if len(aliases) != 1 {
			return nil, nil, fmt.Errorf("%s: %s has %d private key entries, want exactly 1", key, loc, len(aliases))
		}
		p, err := jksPassword("ssl.key.password", keyPw)
		if err != nil {
			return nil, nil, err
		}
		e, err := ks.GetPrivateKeyEntry(aliases[0], p)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %s: cannot decrypt the key of entry %q (wrong ssl.key.password?)", key, loc, aliases[0])
		}
		pkcs8 = e.PrivateKey
		for _, c := range e.CertificateChain {
			chain = append(chain, c.Content)
		}
	} else {
		// PKCS12 keys are encrypted under the store password (keytool
		// refuses another key password for PKCS12).
		priv, leaf, cas, err := pkcs12.DecodeChain(data, storePw)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: cannot read PKCS12 store %s: %w", key, loc, p12Err(err, "ssl.keystore.password"))
		}
		if pkcs8, err = x509.MarshalPKCS8PrivateKey(priv); err != nil {
			return nil, nil, fmt.Errorf("%s: %s: %w", key, loc, err)
		}
		// go-pkcs12 takes the first certificate as the leaf; put the one
		// that matches the key first.
		all := append([]*x509.Certificate{leaf}, cas...)
		pub, _ := priv.(interface{ Public() crypto.PublicKey })
		for i, c := range all {
			if k, ok := c.PublicKey.(interface{ Equal(crypto.PublicKey) bool }); ok && pub != nil && k.Equal(pub.Public()) {
				all[0], all[i] = all[i], all[0]
				break
			}
		}
		for _, c := range all {
			chain = append(chain, c.Raw)
		}
	}
	for _, der := range chain {
		certPEM = append(certPEM, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	}
	return certPEM, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8}), nil
}
