package rest

import (
	"bufio"
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func TestLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:8083": true, "127.1.2.3:1": true, "[::1]:8083": true, "localhost:8083": true,
		":8083": false, "0.0.0.0:8083": false, "[::]:8083": false, "10.1.2.3:8083": false, "kmirror.example:8083": false,
	} {
		if got := Loopback(addr); got != want {
			t.Errorf("Loopback(%q) = %v, want %v", addr, got, want)
		}
	}
}

// serve starts h with limits on 127.0.0.1 and returns its address.
func serve(t *testing.T, h http.Handler, lim Limits) string {
	t.Helper()
	srv, addr, err := Serve(Listen{Name: "test API", Addr: "127.0.0.1:0", Limits: lim}, h, discard())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return addr.String()
}

// closedWithin reports whether the server closes c within d.
func closedWithin(c net.Conn, d time.Duration) bool {
	c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, c)
	return !errors.Is(err, os.ErrDeadlineExceeded)
}

func TestServeTimeouts(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })
	tests := []struct {
		name string
		lim  Limits
		do   func(c net.Conn) // what the client sends before waiting
	}{
		{"headers never finished", Limits{ReadHeader: 200 * time.Millisecond}, func(c net.Conn) {
			io.WriteString(c, "GET /x HTTP/1.1\r\nHost: a\r\n")
		}},
		{"body never finished", Limits{Read: 300 * time.Millisecond}, func(c net.Conn) {
			io.WriteString(c, "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 100\r\n\r\nabc")
		}},
		{"idle keep-alive", Limits{Idle: 200 * time.Millisecond}, func(c net.Conn) {
			io.WriteString(c, "GET /x HTTP/1.1\r\nHost: a\r\n\r\n")
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err == nil {
				resp.Body.Close()
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", serve(t, ok, tc.lim))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			tc.do(c)
			if !closedWithin(c, 3*time.Second) {
				t.Error("the server kept the connection open")
			}
		})
	}
	t.Run("slow handler cannot write past the write timeout", func(t *testing.T) {
		slow := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			time.Sleep(300 * time.Millisecond)
			w.Write(bytes.Repeat([]byte("x"), 1<<20))
		})
		resp, err := http.Get("http://" + serve(t, slow, Limits{Write: 100 * time.Millisecond}) + "/")
		if err == nil {
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		if err == nil {
			t.Error("the whole response arrived after the write timeout")
		}
	})
}

func TestServeTLS(t *testing.T) {
	dir := t.TempDir()
	cert, key := selfSigned(t, dir)
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })
	bad := filepath.Join(dir, "bad.pem")
	os.WriteFile(bad, []byte("not a pem"), 0o600)
	for _, tc := range []struct {
		name, cert, key, err string
	}{
		{"missing file", filepath.Join(dir, "nope.pem"), key, "nope.pem"},
		{"not a certificate", bad, key, "bad.pem"},
		{"key without certificate", "", key, "both a certificate and a key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := Serve(Listen{Name: "REST API", Addr: "127.0.0.1:0", CertFile: tc.cert, Key: tc.key}, ok, discard())
			if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "REST API") {
				t.Fatalf("err = %v, want one naming the listener and %q", err, tc.err)
			}
		})
	}
	t.Run("serves HTTPS", func(t *testing.T) {
		srv, addr, err := Serve(Listen{Name: "REST API", Addr: "127.0.0.1:0", CertFile: cert, Key: key}, ok, discard())
		if err != nil {
			t.Fatal(err)
		}
		defer srv.Close()
		pool := x509.NewCertPool()
		pemBytes, _ := os.ReadFile(cert)
		pool.AppendCertsFromPEM(pemBytes)
		cl := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
		resp, err := cl.Get("https://" + addr.String() + "/")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
	})
}

func selfSigned(t *testing.T, dir string) (certFile, keyFile string) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kd, _ := x509.MarshalECPrivateKey(k)
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd}), 0o600)
	return certFile, keyFile
}

func TestProfilesNeedTheToken(t *testing.T) {
	tests := []struct {
		name, token, send string
		code              int
	}{
		{"no token sent", "s3cret", "", 401},
		{"wrong token", "s3cret", "nope", 401},
		{"right token", "s3cret", "s3cret", 200},
		{"API without a token serves no profiles", "", "", 404},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			addr := serve(t, Handler(&fake{}, tc.token, discard()), Limits{})
			for _, path := range []string{"/debug/pprof/", "/debug/pprof/heap", "/debug/pprof/cmdline"} {
				req, _ := http.NewRequest("GET", "http://"+addr+path, nil)
				if tc.send != "" {
					req.Header.Set("Authorization", "Bearer "+tc.send)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != tc.code {
					t.Errorf("%s: status %d, want %d", path, resp.StatusCode, tc.code)
				}
			}
		})
	}
}

func TestStartWarnsWhenOpenBeyondLoopback(t *testing.T) {
	tests := []struct {
		addr, token string
		warn        bool
	}{
		{"127.0.0.1:0", "", false},
		{":0", "s3cret", false},
		{":0", "", true},
	}
	for _, tc := range tests {
		var buf bytes.Buffer
		log := slog.New(slog.NewTextHandler(&buf, nil))
		srv, _, err := Start(&fake{}, Listen{Name: "REST API", Addr: tc.addr}, tc.token, log)
		if err != nil {
			t.Fatal(err)
		}
		srv.Close()
		if got := strings.Contains(buf.String(), "level=WARN") && strings.Contains(buf.String(), "no authentication"); got != tc.warn {
			t.Errorf("addr %q token %v: warned %v, want %v\n%s", tc.addr, tc.token != "", got, tc.warn, buf.String())
		}
	}
}
