package connect

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/kmirror/kmirror/internal/config"
)

// Worker is a Connect distributed worker file (connect-distributed.properties),
// the keys kmirror uses of it.
type Worker struct {
	Path        string
	Bootstrap   string            // bootstrap.servers: the cluster of the config topic
	Client      map[string]string // bootstrap.servers and the security keys for that cluster
	GroupID     string            // group.id: names the workers' consumer groups
	ConfigTopic string            // config.storage.topic
	ConfigRF    int16             // config.storage.replication.factor; -1: broker default
	StatusTopic string            // status.storage.topic; default GROUP-status
	StatusRF    int16             // status.storage.replication.factor; -1: broker default
	// StatusPartitions is status.storage.partitions (Connect's default 5).
	StatusPartitions int32
	Listener         string      // host:port the REST API listens on
	WorkerID         string      // host:port the worker is known by (rest.advertised.*)
	REST             config.REST // kmirror.rest.token, kmirror.rest.auth, kmirror.rest.tls.*
	// ListenerSet: listeners or rest.host.name chose the REST API's
	// interface (else Connect's default, every interface).
	ListenerSet bool
	// Providers are the config providers the file declares
	// (config.providers*): the only ones connector configs may use.
	Providers *config.Providers
	// Offsets holds offset.storage.replication.factor and
	// offset.storage.partitions: how the flows create their offsets topic.
	Offsets  map[string]string
	Warnings []string
}

// Keys of a Connect worker file that kmirror accepts but that change
// nothing: kmirror keeps progress where MM2 does (mm2-offsets.SOURCE.internal
// on the target; offset.storage.replication.factor and .partitions apply)
// and needs no converters or plugins.
var ignoredWorkerKeys = map[string]bool{
	"offset.storage.topic": true,
	"key.converter":        true, "value.converter": true, "key.converter.schemas.enable": true, "value.converter.schemas.enable": true,
	"header.converter": true, "offset.flush.interval.ms": true, "offset.flush.timeout.ms": true, "plugin.path": true,
	"plugin.discovery": true, "rest.advertised.listener": true, "session.timeout.ms": true, "heartbeat.interval.ms": true,
	"rebalance.timeout.ms": true, "scheduled.rebalance.max.delay.ms": true, "connect.protocol": true,
	"exactly.once.source.support": true, "client.id": true,
}

// LoadWorker reads and checks a worker file. An unknown key is an error
// naming file, line and key, as kmirror's MM2 files are checked.
func LoadWorker(path string) (*Worker, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseWorker(path, data)
}

// ParseWorker is LoadWorker on the contents of the file called path.
func ParseWorker(path string, data []byte) (*Worker, error) {
	p, err := config.ParseProperties(path, data)
	if err != nil {
		return nil, err
	}
	w := &Worker{Path: path, Client: map[string]string{}, ConfigRF: 3, StatusRF: 3, StatusPartitions: 5, Offsets: map[string]string{}}
	at := func(k string) string { return fmt.Sprintf("%s:%d: %s", path, p.Line(k), k) }
	var errs []string
	// As a Connect worker, resolve the file's own ${...} references with
	// the providers it declares.
	w.Providers, err = config.ResolveProviders(p, path, os.LookupEnv)
	if err != nil {
		errs = append(errs, err.Error())
	}
	w.Warnings = append(w.Warnings, w.Providers.Warnings...)
	addr := restAddr{port: "8083"}
	errs = append(errs, readWorkerKeys(w, p, &addr, at)...)
	errs = append(errs, missingWorkerKeys(p, path)...)
	defaultStatusStorage(w, p)
	errs = append(errs, setRESTAddress(w, addr, path, at)...)
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s", strings.Join(errs, "\n"))
	}
	return w, nil
}

// restAddr holds the worker file's keys that place the REST API.
type restAddr struct {
	listeners, host, port, advHost, advPort string
}

// workerKeys are the handlers of the worker file keys kmirror reads by
// name: each stores the trimmed value v in w or a and reports what is
// wrong with v.
var workerKeys = map[string]func(w *Worker, a *restAddr, v string) error{
	"bootstrap.servers": func(w *Worker, _ *restAddr, v string) error {
		w.Bootstrap = v
		w.Client["bootstrap.servers"] = v
		return nil
	},
	"group.id":             func(w *Worker, _ *restAddr, v string) error { w.GroupID = v; return nil },
	"config.storage.topic": func(w *Worker, _ *restAddr, v string) error { w.ConfigTopic = v; return nil },
	"config.storage.replication.factor": func(w *Worker, _ *restAddr, v string) (err error) {
		w.ConfigRF, err = parseStorageRF(v)
		return err
	},
	"status.storage.replication.factor": func(w *Worker, _ *restAddr, v string) (err error) {
		w.StatusRF, err = parseStorageRF(v)
		return err
	},
	"status.storage.topic": func(w *Worker, _ *restAddr, v string) error { w.StatusTopic = v; return nil },
	"status.storage.partitions": func(w *Worker, _ *restAddr, v string) error {
		n, err := strconv.ParseInt(v, 10, 32)
		w.StatusPartitions = int32(n)
		if err != nil || n < 1 {
			return errors.New("want a positive number")
		}
		return nil
	},
	"offset.storage.replication.factor": func(w *Worker, _ *restAddr, v string) error {
		w.Offsets["offset.storage.replication.factor"] = v
		return nil
	},
	"offset.storage.partitions": func(w *Worker, _ *restAddr, v string) error {
		w.Offsets["offset.storage.partitions"] = v
		return nil
	},
	"listeners": func(w *Worker, a *restAddr, v string) error {
		a.listeners = v
		w.ListenerSet = true
		return nil
	},
	"rest.host.name": func(w *Worker, a *restAddr, v string) error {
		a.host = v
		w.ListenerSet = true
		return nil
	},
	"rest.port":                 func(_ *Worker, a *restAddr, v string) error { a.port = v; return nil },
	"rest.advertised.host.name": func(_ *Worker, a *restAddr, v string) error { a.advHost = v; return nil },
	"rest.advertised.port":      func(_ *Worker, a *restAddr, v string) error { a.advPort = v; return nil },
	config.RESTTokenKey:         func(w *Worker, _ *restAddr, v string) error { w.REST.Token = v; return nil },
	config.RESTAuthKey: func(w *Worker, _ *restAddr, v string) error {
		w.REST.Open = v == "none"
		if v != "none" && v != "token" {
			return errors.New(`want "token" or "none"`)
		}
		return nil
	},
	config.RESTAllowedHostsKey: func(w *Worker, _ *restAddr, v string) (err error) {
		w.REST.AllowedHosts, err = config.ParseAllowedHosts(v)
		return err
	},
	config.RESTCertKey: func(w *Worker, _ *restAddr, v string) error { w.REST.TLSCert = v; return nil },
	config.RESTKeyKey:  func(w *Worker, _ *restAddr, v string) error { w.REST.TLSKey = v; return nil },
}

// parseStorageRF parses a storage topic's replication factor: positive, or
// -1 for the broker default.
func parseStorageRF(v string) (int16, error) {
	n, err := strconv.ParseInt(v, 10, 16)
	if err != nil || (n < 1 && n != -1) {
		return int16(n), errors.New("want a positive number or -1 (the broker default)")
	}
	return int16(n), nil
}

// readWorkerKeys reads every key of the worker file p into w and a, and
// returns the problems with them; at names a key and its line.
func readWorkerKeys(w *Worker, p *config.Properties, a *restAddr, at func(k string) string) []string {
	var errs []string
	for _, k := range p.Keys() {
		v, _ := p.Get(k)
		v = strings.TrimSpace(v)
		read, named := workerKeys[k]
		switch {
		case config.IsProviderKey(k):
		case named:
			if err := read(w, a, v); err != nil {
				errs = append(errs, at(k)+": "+err.Error())
			}
		case config.IsClientConnectionKey(k):
			w.Client[k] = v
		case ignoredWorkerKeys[k]:
			w.Warnings = append(w.Warnings, at(k)+": accepted but has no effect in kmirror")
		default:
			errs = append(errs, at(k)+": unknown key of a Connect worker file")
		}
	}
	return errs
}

// missingWorkerKeys reports the keys a Connect distributed worker needs
// that the file p lacks.
func missingWorkerKeys(p *config.Properties, path string) []string {
	var errs []string
	for _, k := range []string{"bootstrap.servers", "group.id", "config.storage.topic"} {
		if _, ok := p.Get(k); !ok {
			errs = append(errs, fmt.Sprintf("%s: %s: missing (a Connect distributed worker needs it)", path, k))
		}
	}
	return errs
}

// defaultStatusStorage fills in the status topic settings the file p
// leaves out.
func defaultStatusStorage(w *Worker, p *config.Properties) {
	if _, ok := p.Get("status.storage.replication.factor"); !ok {
		// Connect's default is 3; a file that sets the config topic's
		// (for a small cluster) and predates kmirror's status topic
		// gets that.
		w.StatusRF = w.ConfigRF
	}
	if w.StatusTopic == "" && w.GroupID != "" {
		// Connect requires the key; files written for an earlier
		// kmirror connect, which kept status in memory, may lack it.
		w.StatusTopic = w.GroupID + "-status"
		w.Warnings = append(w.Warnings, fmt.Sprintf("%s: status.storage.topic: missing (a Connect worker needs it); using %s", w.Path, w.StatusTopic))
	}
}

// setRESTAddress sets where the REST API listens (w.Listener) and the
// address other workers reach it at (w.WorkerID), and returns the problems
// with the keys that place it.
func setRESTAddress(w *Worker, a restAddr, path string, at func(k string) string) []string {
	var errs []string
	w.Listener = net.JoinHostPort(a.host, a.port)
	if a.listeners != "" {
		first := strings.TrimSpace(strings.Split(a.listeners, ",")[0])
		scheme, hp, ok := strings.Cut(first, "://")
		switch {
		case !ok || (scheme != "http" && scheme != "https"):
			errs = append(errs, at("listeners")+": want http://HOST:PORT or https://HOST:PORT")
		case scheme == "https" && w.REST.TLSCert == "":
			errs = append(errs, at("listeners")+": https needs "+config.RESTCertKey+" and "+config.RESTKeyKey+" (PEM files)")
		default:
			w.Listener = hp
		}
	}
	lh, lp, err := net.SplitHostPort(w.Listener)
	if err != nil {
		errs = append(errs, fmt.Sprintf("%s: listeners: %q is not HOST:PORT", path, w.Listener))
	}
	advHost, advPort := a.advHost, a.advPort
	if advHost == "" {
		advHost = lh
		if advHost == "" || advHost == "0.0.0.0" || advHost == "::" {
			advHost, _ = os.Hostname()
		}
	}
	if advPort == "" {
		advPort = lp
	}
	w.WorkerID = net.JoinHostPort(advHost, advPort)
	return errs
}

// URL is the worker's REST API as other workers reach it: the scheme of
// its listener and the advertised host and port (WorkerID).
func (w *Worker) URL() string {
	if w.REST.TLSCert != "" {
		return "https://" + w.WorkerID
	}
	return "http://" + w.WorkerID
}

// LoopbackListener is addr (HOST:PORT) on 127.0.0.1: where an API without
// a token listens unless the worker file names an interface.
func LoopbackListener(addr string) string {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		port = "8083"
	}
	return net.JoinHostPort("127.0.0.1", port)
}
