package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kmirror/kmirror/internal/testkafka"
)

// TestRESTProbesUnderConnectionFlood (issue 19, items 3 and 11): with the
// REST API's 64 connections held as idle keep-alives (the attack),
// and one client flooding it with connections that send nothing, /health
// and /ready of a new client answer within 10 s (a locked-out one waits 2 minutes), and so does the API with
// its token. A profile longer than 60 s is refused at once.
func TestRESTProbesUnderConnectionFlood(t *testing.T) {
	t.Parallel()
	cs := testkafka.Shared(t, 2)
	a, b := cs[0], cs[1]
	addr := freeAddr(t)
	src, dst := alias(t, "src"), alias(t, "dst")
	topic := testkafka.Topic(t, "probes")
	a.CreateTopic(t, topic, 1, nil)
	cfg := writeFile(t, "mm2.properties", mm2Config(src, dst, a, b, src+"->"+dst+".topics = "+topic,
		"kmirror.rest.listener = "+addr, "kmirror.rest.token = probe-t0ken"))
	startKmirror(t, cfg)
	waitFor(t, 60*time.Second, "the REST API", func() bool { code, _ := restCall(addr, "GET", "/health", ""); return code == 200 })

	// A locked-out client waits for the 2-minute idle keep-alive; 10 s
	// tells it from a slow machine's answer.
	const wait = 10 * time.Second
	dial := func(ip string) net.Conn {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: wait}
		c, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	// get sends one request on c and reads the answer within wait.
	get := func(c net.Conn, path, token string) (int, error) {
		c.SetDeadline(time.Now().Add(wait))
		auth := ""
		if token != "" {
			auth = "Authorization: Bearer " + token + "\r\n"
		}
		if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\n%s\r\n", path, addr, auth); err != nil {
			return 0, err
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		_, err = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, err
	}

	// The attack: 64 connections, each one GET /health, left
	// open; spread over four clients, and then one client's flood of
	// 200 connections that send nothing.
	for i := range 64 {
		if code, err := get(dial(fmt.Sprintf("127.0.2.%d", 1+i%4)), "/health", ""); code != 200 {
			t.Fatalf("holding connection %d: %d %v", i, code, err)
		}
	}
	for range 200 {
		dial("127.0.2.9")
	}
	for _, tc := range []struct {
		path, token string
		codes       string
	}{
		{"/health", "", "200"},
		{"/ready", "", "200 503"}, // answered; the flow's state is not this test's
		{"/status", "probe-t0ken", "200"},
	} {
		start := time.Now()
		code, err := get(dial("127.0.0.1"), tc.path, tc.token)
		if err != nil || !strings.Contains(tc.codes, fmt.Sprint(code)) {
			t.Errorf("%s during the flood: %d %v after %v, want %s within %v", tc.path, code, err, time.Since(start), tc.codes, wait)
		} else {
			t.Logf("%s during the flood: %d in %v", tc.path, code, time.Since(start).Round(time.Millisecond))
		}
	}

	// Profiles: at most 60 s, refused at once beyond.
	for path, want := range map[string]int{
		"/debug/pprof/profile?seconds=3600":                400,
		"/debug/pprof/profile?seconds=9223372036854775807": 400,
		"/debug/pprof/trace?seconds=61":                    400,
		"/debug/pprof/profile?seconds=1":                   200,
	} {
		code, out := restCall(addr, "GET", path, "probe-t0ken")
		if code != want {
			t.Errorf("%s: %d %.200q, want %d", path, code, out, want)
		}
	}
}
