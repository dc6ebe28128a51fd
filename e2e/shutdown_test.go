package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/internal/testkafka"
)

// flowState returns the state and error of flow name in GET /status at
// addr ("absent" if it is not listed), and whether /status answered.
func flowState(addr, name string) (state, errText string, ok bool) {
	code, body := httpGet("http://" + addr + "/status")
	var st struct {
		Flows []struct {
			Name  string `json:"name"`
			State string `json:"state"`
			Error string `json:"error"`
		} `json:"flows"`
	}
	if code != 200 || json.Unmarshal([]byte(body), &st) != nil {
		return "", "", false
	}
	for _, f := range st.Flows {
		if f.Name == name {
			return f.State, f.Error, true
		}
	}
	return "absent", "", true
}

// exitCode is the exit status of a process that has ended (-1 when a
// signal killed it).
func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return 0
}

// TestStopTargetDown: SIGTERM while the target cluster is down (killed)
// ends kmirror within --shutdown-timeout, /status and /ready answer
// during the stop (the flow shows as stopping), and a second SIGTERM
// exits at once with a non-zero code.
func TestStopTargetDown(t *testing.T) {
	t.Parallel()
	src := testkafka.Shared(t, 1)[0]
	tgt := testkafka.Start(t, testkafka.Options{})[0]

	type mirror struct {
		p          *proc
		rest, flow string
		produce    func() // 50 more records to the source topic
	}
	// start runs one kmirror copying a topic of its own from src to tgt,
	// and waits for the records to arrive.
	start := func(name string, args ...string) mirror {
		a, b := alias(t, "s"+name), alias(t, "t"+name)
		topic := testkafka.Topic(t, "stop"+name)
		src.CreateTopic(t, topic, 2, nil)
		produce := func() {
			var recs []*kgo.Record
			for i := range 50 {
				recs = append(recs, &kgo.Record{Topic: topic, Value: []byte(fmt.Sprint(i))})
			}
			src.Produce(t, recs...)
		}
		produce()
		rest := freeAddr(t)
		file := writeFile(t, name+".properties", mm2Config(a, b, src, tgt,
			a+"->"+b+".topics = "+topic, "kmirror.rest.listener = "+rest, "kmirror.rest.auth = none"))
		p := startKmirror(t, append(args, file)...)
		waitFor(t, 90*time.Second, name+": records on the target", func() bool {
			return hasTopic(t, tgt, a+"."+topic) && countAll(t, tgt, a+"."+topic) == 50
		})
		return mirror{p, rest, a + "->" + b, produce}
	}
	bounded := start("bounded", "--shutdown-timeout", "10s")
	twice := start("twice", "--shutdown-timeout", "60s")

	tgt.KillNode(t, tgt.Nodes()[0])
	// Records the target will never acknowledge.
	bounded.produce()
	twice.produce()

	t.Run("exits within the shutdown timeout", func(t *testing.T) {
		m := bounded
		began := time.Now()
		if err := m.p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		sawStopping := false
		for done := false; !done; {
			select {
			case <-m.p.done:
				done = true
				continue
			default:
			}
			// While it stops, /status and /ready answer (httpGet gives
			// up after 5 s); the flow is stopping.
			state, _, ok := flowState(m.rest, m.flow)
			ready, _ := httpGet("http://" + m.rest + "/ready")
			if !ok || ready == 0 {
				// Fine if the process is exiting (the listener closed
				// first); not if it goes on without answering.
				select {
				case <-m.p.done:
					done = true
					continue
				case <-time.After(3 * time.Second):
				}
				m.p.cmd.Process.Signal(syscall.SIGQUIT) // goroutines to the log
				<-m.p.done
				t.Fatalf("/status or /ready did not answer %v into the stop (ready %d)", time.Since(began), ready)
			}
			if state == "stopping" {
				sawStopping = true
				if ready != 503 {
					t.Errorf("/ready = %d while stopping, want 503", ready)
				}
			}
			if time.Since(began) > 25*time.Second {
				t.Fatalf("kmirror still runs %v after SIGTERM with --shutdown-timeout 10s", time.Since(began))
			}
			time.Sleep(200 * time.Millisecond)
		}
		took := time.Since(began)
		t.Logf("stopped in %v, exit code %d", took, exitCode(m.p.err))
		if took > 15*time.Second {
			t.Errorf("kmirror stopped %v after SIGTERM, want within --shutdown-timeout 10s (+5s)", took)
		}
		if !sawStopping {
			t.Errorf("/status never showed %s as stopping", m.flow)
		}
		if !strings.Contains(m.p.log.String(), "stopping flows") {
			t.Errorf("log does not say the flows stop:\n%s", m.p.log.String())
		}
	})

	t.Run("a second signal exits at once", func(t *testing.T) {
		m := twice
		if err := m.p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 20*time.Second, "the flow to show as stopping", func() bool {
			state, _, _ := flowState(m.rest, m.flow)
			return state == "stopping"
		})
		began := time.Now()
		if err := m.p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		select {
		case <-m.p.done:
		case <-time.After(5 * time.Second):
			t.Fatal("kmirror still runs 5s after a second SIGTERM")
		}
		t.Logf("exited %v after the second signal, code %d", time.Since(began), exitCode(m.p.err))
		if code := exitCode(m.p.err); code == 0 {
			t.Errorf("exit code %d after a second signal, want non-zero", code)
		}
		if !strings.Contains(m.p.log.String(), "second signal: exiting at once") {
			t.Errorf("log does not say the second signal cut the stop short:\n%s", m.p.log.String())
		}
	})
}
