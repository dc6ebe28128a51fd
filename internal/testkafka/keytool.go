package testkafka

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Key and trust stores made with the JDK's keytool, as MirrorMaker 2 users
// make them. The helpers run keytool in dir and fail the test on error.

// Keytool runs keytool with args in dir.
func Keytool(t testing.TB, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("keytool", args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("testkafka: keytool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// TrustStore imports the PEM certificate caFile into a new trust store
// dir/name of type typ (JKS or PKCS12) with password pw, and returns its path.
func TrustStore(t testing.TB, dir, name, typ, pw, caFile string) string {
	t.Helper()
	Keytool(t, dir, "-importcert", "-noprompt", "-alias", "ca", "-file", caFile,
		"-keystore", name, "-storetype", typ, "-storepass", pw)
	return filepath.Join(dir, name)
}

// ClientCA makes a CA in dir/client-ca.p12 for ClientStore and returns the
// path of its certificate in PEM, for a broker's trust store.
func ClientCA(t testing.TB, dir string) string {
	t.Helper()
	Keytool(t, dir, "-genkeypair", "-alias", "ca", "-keyalg", "EC", "-groupname", "secp256r1",
		"-dname", "CN=kmirror client CA", "-ext", "bc:c", "-validity", "2",
		"-keystore", "client-ca.p12", "-storetype", "PKCS12", "-storepass", "client-ca")
	Keytool(t, dir, "-exportcert", "-rfc", "-alias", "ca", "-keystore", "client-ca.p12",
		"-storepass", "client-ca", "-file", "client-ca.pem")
	return filepath.Join(dir, "client-ca.pem")
}

// ClientStore makes a key store dir/name of type typ holding one client key
// (password keyPw; PKCS12 needs keyPw == storePw) with a clientAuth
// certificate for cn signed by ClientCA's CA, and returns its path.
func ClientStore(t testing.TB, dir, name, typ, storePw, keyPw, cn string) string {
	t.Helper()
	store := []string{"-keystore", name, "-storetype", typ, "-storepass", storePw}
	run := func(args ...string) { Keytool(t, dir, append(args, store...)...) }
	run("-genkeypair", "-alias", "client", "-keyalg", "EC", "-groupname", "secp256r1",
		"-dname", "CN="+cn, "-validity", "2", "-keypass", keyPw)
	run("-certreq", "-alias", "client", "-keypass", keyPw, "-file", name+".csr")
	Keytool(t, dir, "-gencert", "-alias", "ca", "-keystore", "client-ca.p12", "-storepass", "client-ca",
		"-infile", name+".csr", "-outfile", name+".crt", "-rfc", "-ext", "eku=clientAuth", "-validity", "2")
	// The CA goes in first so that keytool can build the chain, then out:
	// the store keeps one entry, the key with its chain.
	run("-importcert", "-noprompt", "-alias", "ca", "-file", "client-ca.pem")
	run("-importcert", "-alias", "client", "-keypass", keyPw, "-file", name+".crt")
	run("-delete", "-alias", "ca")
	return filepath.Join(dir, name)
}
