package clients

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"maps"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// pki is an in-test certificate authority.
type pki struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  string
}

var serial int64

func newKey(t *testing.T) *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func newCA(t *testing.T, name string) *pki {
	key := newKey(t)
	serial++
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(serial),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &pki{cert, key, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))}
}

// issue returns a leaf certificate and key in PEM for the given names.
func (ca *pki) issue(t *testing.T, usage x509.ExtKeyUsage, dns []string, ips ...net.IP) (certPEM, keyPEM string) {
	key := newKey(t)
	serial++
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: "leaf"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		DNSNames:     dns,
		IPAddresses:  ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}))
}

// serve starts a TLS listener on 127.0.0.1 and reports each handshake's
// result on the returned channel.
func serve(t *testing.T, certPEM, keyPEM string, clientCA *pki) (string, <-chan error) {
	cert, err := tls.X509KeyPair([]byte(certPEM), []byte(keyPEM))
	if err != nil {
		t.Fatal(err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}}
	if clientCA != nil {
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
		cfg.ClientCAs = x509.NewCertPool()
		cfg.ClientCAs.AddCert(clientCA.cert)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	results := make(chan error, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.SetDeadline(time.Now().Add(5 * time.Second))
			results <- c.(*tls.Conn).Handshake()
			c.Close()
		}
	}()
	return ln.Addr().String(), results
}

// dial connects with the config built from props, setting ServerName from
// the address the way kgo does.
func dial(t *testing.T, props map[string]string, addr string) error {
	t.Helper()
	b := &builder{props: props, used: map[string]bool{}}
	cfg, err := b.tlsConfig()
	if err != nil {
		t.Fatalf("tlsConfig: %v", err)
	}
	c := cfg.Clone()
	host, _, _ := net.SplitHostPort(addr)
	if c.ServerName == "" {
		c.ServerName = host
	}
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, c)
	if err != nil {
		return err
	}
	defer conn.Close()
	// TLS 1.3 client auth failures surface on the first read.
	conn.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	_, err = conn.Read(make([]byte, 1))
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return nil
	}
	if err != nil && strings.Contains(err.Error(), "EOF") {
		return nil // server closed after a good handshake
	}
	return err
}

func writeFile(t *testing.T, name, data string) string {
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// with returns a copy of base with the key, value pairs kv set.
func with(base map[string]string, kv ...string) map[string]string {
	m := maps.Clone(base)
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

// handshake is one dial with props to addr; fail is a substring of the
// expected error, "" for success.
type handshake struct {
	name  string
	props map[string]string
	addr  string
	fail  string
}

func handshakes(t *testing.T, cases []handshake) {
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := dial(t, tc.props, tc.addr)
			switch {
			case tc.fail == "" && err != nil:
				t.Errorf("handshake failed: %v", err)
			case tc.fail != "" && err == nil:
				t.Errorf("handshake succeeded, want error containing %q", tc.fail)
			case tc.fail != "" && !strings.Contains(err.Error(), tc.fail):
				t.Errorf("err = %v, want %q", err, tc.fail)
			}
		})
	}
}

func TestTLS(t *testing.T) {
	ca := newCA(t, "test-ca")
	rogue := newCA(t, "rogue-ca")
	caFile := writeFile(t, "ca.pem", ca.pem)
	good, goodKey := ca.issue(t, x509.ExtKeyUsageServerAuth, []string{"localhost"}, net.ParseIP("127.0.0.1"))
	wrongHost, wrongHostKey := ca.issue(t, x509.ExtKeyUsageServerAuth, []string{"broker.example"})
	untrusted, untrustedKey := rogue.issue(t, x509.ExtKeyUsageServerAuth, nil, net.ParseIP("127.0.0.1"))
	clientCert, clientKey := ca.issue(t, x509.ExtKeyUsageClientAuth, nil)
	keystoreFile := writeFile(t, "client.pem", clientKey+clientCert)

	goodAddr, _ := serve(t, good, goodKey, nil)
	wrongHostAddr, _ := serve(t, wrongHost, wrongHostKey, nil)
	untrustedAddr, _ := serve(t, untrusted, untrustedKey, nil)
	mtlsAddr, _ := serve(t, good, goodKey, ca)

	trustFile := map[string]string{"ssl.truststore.type": "PEM", "ssl.truststore.location": caFile}
	handshakes(t, []handshake{
		{"file truststore", trustFile, goodAddr, ""},
		{"inline truststore", map[string]string{"ssl.truststore.type": "PEM", "ssl.truststore.certificates": ca.pem}, goodAddr, ""},
		{"PEM file without type", map[string]string{"ssl.truststore.location": caFile}, goodAddr, ""},
		{"system roots reject test CA", map[string]string{}, goodAddr, "certificate"},
		{"hostname checked by default", trustFile, wrongHostAddr, "cannot validate certificate for 127.0.0.1"},
		{"hostname checked with https", with(trustFile, "ssl.endpoint.identification.algorithm", "HTTPS"), wrongHostAddr, "cannot validate certificate for 127.0.0.1"},
		{"hostname skipped when empty", with(trustFile, "ssl.endpoint.identification.algorithm", ""), wrongHostAddr, ""},
		{"chain still verified when empty", with(trustFile, "ssl.endpoint.identification.algorithm", ""), untrustedAddr, "unknown authority"},
		{"untrusted chain", trustFile, untrustedAddr, "unknown authority"},
		{"mTLS without client cert", trustFile, mtlsAddr, "certificate"},
		{"mTLS keystore file", with(trustFile, "ssl.keystore.type", "PEM", "ssl.keystore.location", keystoreFile), mtlsAddr, ""},
		{"mTLS inline keystore", with(trustFile, "ssl.keystore.type", "PEM", "ssl.keystore.certificate.chain", clientCert, "ssl.keystore.key", clientKey), mtlsAddr, ""},
		{"TLS 1.2 only", with(trustFile, "ssl.enabled.protocols", "TLSv1.2"), goodAddr, ""},
	})
}

// TestTLSThroughKgo checks the options end to end: a kgo client built from
// Options completes a verified handshake (ServerName set by kgo).
func TestTLSThroughKgo(t *testing.T) {
	ca := newCA(t, "test-ca")
	cert, key := ca.issue(t, x509.ExtKeyUsageServerAuth, nil, net.ParseIP("127.0.0.1"))
	for _, tc := range []struct {
		name  string
		trust string
		ok    bool
	}{{"trusted", ca.pem, true}, {"untrusted", newCA(t, "other").pem, false}} {
		t.Run(tc.name, func(t *testing.T) {
			addr, results := serve(t, cert, key, nil)
			opts, err := Options(map[string]string{
				"bootstrap.servers":           addr,
				"security.protocol":           "SSL",
				"ssl.truststore.type":         "PEM",
				"ssl.truststore.certificates": tc.trust,
			})
			if err != nil {
				t.Fatal(err)
			}
			cl, err := kgo.NewClient(append(opts, kgo.RequestRetries(0))...)
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			_ = cl.Ping(ctx) // the server speaks no Kafka; only the handshake matters
			select {
			case err := <-results:
				if (err == nil) != tc.ok {
					t.Errorf("server handshake err = %v, want ok=%v", err, tc.ok)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("no connection")
			}
		})
	}
}

func TestTLSConfigErrors(t *testing.T) {
	ca := newCA(t, "ca")
	cert, key := ca.issue(t, x509.ExtKeyUsageClientAuth, nil)
	notPEM := writeFile(t, "store.jks", "\xfe\xed\xfe\xed binary keystore")
	encKey := "-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----\n"
	_, otherKey := ca.issue(t, x509.ExtKeyUsageClientAuth, nil)
	for _, tc := range []struct {
		name  string
		props map[string]string
		want  string
	}{
		{"damaged JKS file without password", map[string]string{"ssl.truststore.location": notPEM}, "cannot read JKS store"},
		{"damaged JKS file", map[string]string{"ssl.truststore.location": notPEM, "ssl.truststore.type": "PKCS12", "ssl.truststore.password": "pw"}, "cannot read JKS store"},
		{"JCEKS file", map[string]string{"ssl.truststore.location": writeFile(t, "s.jceks", "\xce\xce\xce\xce")}, "JCEKS store, which is not supported"},
		{"unknown file", map[string]string{"ssl.truststore.location": writeFile(t, "s.bin", "junk")}, "neither a JKS, a PKCS12 nor a PEM file"},
		{"inline certificates with JKS type", map[string]string{"ssl.truststore.certificates": ca.pem, "ssl.truststore.type": "JKS"}, "needs ssl.truststore.type=PEM"},
		{"both truststores", map[string]string{"ssl.truststore.location": notPEM, "ssl.truststore.certificates": ca.pem}, "mutually exclusive"},
		{"no certs", map[string]string{"ssl.truststore.certificates": key}, "no PEM certificates"},
		{"JKS keystore without password", map[string]string{"ssl.keystore.location": notPEM}, "ssl.keystore.password is required"},
		{"chain without key", map[string]string{"ssl.keystore.certificate.chain": cert}, "must be set together"},
		{"encrypted key", map[string]string{"ssl.keystore.certificate.chain": cert, "ssl.keystore.key": encKey, "ssl.key.password": "pw"}, "malformed encrypted private key"},
		{"legacy encrypted key", map[string]string{"ssl.keystore.certificate.chain": cert, "ssl.keystore.key": "-----BEGIN EC PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,00\n\nAAAA\n-----END EC PRIVATE KEY-----\n", "ssl.key.password": "pw"}, "legacy OpenSSL-encrypted keys"},
		{"mismatched key", map[string]string{"ssl.keystore.certificate.chain": cert, "ssl.keystore.key": otherKey}, "invalid certificate or key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &builder{props: tc.props, used: map[string]bool{}}
			_, err := b.tlsConfig()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want %q", err, tc.want)
			}
		})
	}
}
