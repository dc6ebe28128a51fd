package clients

import (
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/kmirror/kmirror/internal/testkafka"
)

// keytoolCA makes testkafka's client CA in dir and returns it.
func keytoolCA(t *testing.T, dir string) *pki {
	data, err := os.ReadFile(testkafka.ClientCA(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(data)
	cert, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return &pki{cert: cert, pem: string(data)}
}

// opensslEncrypt encrypts a PKCS#8 PEM key with openssl pkcs8 -topk8.
func opensslEncrypt(t *testing.T, keyPEM, pw string, args ...string) string {
	t.Helper()
	in := writeFile(t, "plain.key", keyPEM)
	cmd := exec.Command("openssl", append([]string{"pkcs8", "-topk8", "-in", in, "-passout", "pass:" + pw}, args...)...)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("openssl pkcs8 %v: %v", args, err)
	}
	return string(out)
}

// TestKeytoolStores reads trust and key stores that the JDK's keytool
// writes, and checks each against a real TLS handshake.
func TestKeytoolStores(t *testing.T) {
	dir := t.TempDir()
	ca := newCA(t, "server-ca")
	caFile := writeFile(t, "ca.pem", ca.pem)
	serverCert, serverKey := ca.issue(t, x509.ExtKeyUsageServerAuth, nil, net.ParseIP("127.0.0.1"))
	kca := keytoolCA(t, dir)
	addr, _ := serve(t, serverCert, serverKey, nil)
	mtlsAddr, _ := serve(t, serverCert, serverKey, kca)

	trustJKS := testkafka.TrustStore(t, dir, "trust.jks", "JKS", "trust-pass", caFile)
	trustP12 := testkafka.TrustStore(t, dir, "trust.p12", "PKCS12", "trust-pass", caFile)
	otherCA := writeFile(t, "other.pem", newCA(t, "other").pem)
	otherJKS := testkafka.TrustStore(t, dir, "other.jks", "JKS", "trust-pass", otherCA)
	clientJKS := testkafka.ClientStore(t, dir, "client.jks", "JKS", "store-pass", "key-pass", "kmirror client")
	clientJKSSame := testkafka.ClientStore(t, dir, "client2.jks", "JKS", "store-pass", "store-pass", "kmirror client")
	clientP12 := testkafka.ClientStore(t, dir, "client.p12", "PKCS12", "p12-pass", "p12-pass", "kmirror client")

	goCert, goKey := ca.issue(t, x509.ExtKeyUsageClientAuth, nil)
	goMTLS, _ := serve(t, serverCert, serverKey, ca)
	encAES := opensslEncrypt(t, goKey, "pem-pass", "-v2", "aes-256-cbc", "-v2prf", "hmacWithSHA256")
	encAES128 := opensslEncrypt(t, goKey, "pem-pass", "-v2", "aes-128-cbc", "-v2prf", "hmacWithSHA1")
	enc3DES := opensslEncrypt(t, goKey, "pem-pass", "-v2", "des3", "-v2prf", "hmacWithSHA512")
	encFile := writeFile(t, "enc.pem", encAES+goCert)

	jks := map[string]string{"ssl.truststore.location": trustJKS, "ssl.truststore.password": "trust-pass"}
	handshakes(t, []handshake{
		{"JKS truststore, default type", jks, addr, ""},
		{"JKS truststore without password (no integrity check, as in Java)", map[string]string{"ssl.truststore.location": trustJKS}, addr, ""},
		{"JKS truststore, type JKS", with(jks, "ssl.truststore.type", "JKS"), addr, ""},
		{"JKS file read as PKCS12 type", with(jks, "ssl.truststore.type", "pkcs12"), addr, ""},
		{"PKCS12 truststore", map[string]string{"ssl.truststore.type": "PKCS12", "ssl.truststore.location": trustP12, "ssl.truststore.password": "trust-pass"}, addr, ""},
		{"PKCS12 file with default type", map[string]string{"ssl.truststore.location": trustP12, "ssl.truststore.password": "trust-pass"}, addr, ""},
		{"JKS truststore of another CA", map[string]string{"ssl.truststore.location": otherJKS, "ssl.truststore.password": "trust-pass"}, addr, "unknown authority"},
		{"mTLS refused without keystore", jks, mtlsAddr, "certificate"},
		{"mTLS JKS keystore with ssl.key.password", with(jks, "ssl.keystore.location", clientJKS, "ssl.keystore.password", "store-pass", "ssl.key.password", "key-pass"), mtlsAddr, ""},
		{"mTLS JKS keystore, key password defaults to store's", with(jks, "ssl.keystore.location", clientJKSSame, "ssl.keystore.password", "store-pass"), mtlsAddr, ""},
		{"mTLS PKCS12 keystore", with(jks, "ssl.keystore.type", "PKCS12", "ssl.keystore.location", clientP12, "ssl.keystore.password", "p12-pass"), mtlsAddr, ""},
		{"mTLS encrypted PEM key, AES-256", with(jks, "ssl.keystore.type", "PEM", "ssl.keystore.location", encFile, "ssl.key.password", "pem-pass"), goMTLS, ""},
		{"mTLS encrypted inline key, AES-128", with(jks, "ssl.keystore.type", "PEM", "ssl.keystore.certificate.chain", goCert, "ssl.keystore.key", encAES128, "ssl.key.password", "pem-pass"), goMTLS, ""},
		{"mTLS encrypted inline key, 3DES", with(jks, "ssl.keystore.type", "PEM", "ssl.keystore.certificate.chain", goCert, "ssl.keystore.key", enc3DES, "ssl.key.password", "pem-pass"), goMTLS, ""},
	})

	// Bad passwords and types fail with errors that name the key and never
	// show the password.
	for _, tc := range []struct {
		name  string
		props map[string]string
		want  string
	}{
		{"wrong JKS truststore password", map[string]string{"ssl.truststore.location": trustJKS, "ssl.truststore.password": "wrong-pass-1"}, "wrong ssl.truststore.password"},
		{"wrong PKCS12 truststore password", map[string]string{"ssl.truststore.location": trustP12, "ssl.truststore.password": "wrong-pass-1"}, "wrong or missing ssl.truststore.password"},
		{"JKS file with PEM type", map[string]string{"ssl.truststore.type": "PEM", "ssl.truststore.location": trustJKS}, "is not a PEM file but ssl.truststore.type=PEM"},
		{"PEM file with JKS type", map[string]string{"ssl.truststore.type": "JKS", "ssl.truststore.location": caFile}, "is a PEM file but ssl.truststore.type=JKS"},
		{"unknown type", map[string]string{"ssl.truststore.type": "BCFKS", "ssl.truststore.location": trustJKS}, "ssl.truststore.type=BCFKS is not supported"},
		{"wrong key password", with(jks, "ssl.keystore.location", clientJKS, "ssl.keystore.password", "store-pass", "ssl.key.password", "wrong-pass-1"), "wrong ssl.key.password"},
		{"key password missing", with(jks, "ssl.keystore.location", clientJKS, "ssl.keystore.password", "store-pass"), "wrong ssl.key.password"},
		{"keystore password missing", with(jks, "ssl.keystore.location", clientP12), "ssl.keystore.password is required"},
		{"wrong PKCS12 keystore password", with(jks, "ssl.keystore.location", clientP12, "ssl.keystore.password", "wrong-pass-1"), "wrong or missing ssl.keystore.password"},
		{"wrong PEM key password", with(jks, "ssl.keystore.type", "PEM", "ssl.keystore.location", encFile, "ssl.key.password", "wrong-pass-1"), "wrong ssl.key.password"},
		{"encrypted PEM key without password", with(jks, "ssl.keystore.type", "PEM", "ssl.keystore.location", encFile), "set ssl.key.password"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &builder{props: tc.props, used: map[string]bool{}}
			_, err := b.tlsConfig()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "wrong-pass-1") || strings.Contains(err.Error(), "store-pass") {
				t.Errorf("error shows a password: %v", err)
			}
		})
	}
}
