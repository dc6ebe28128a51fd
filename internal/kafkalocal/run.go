package kafkalocal

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// File names inside a run folder.
const (
	StateFile = "clusters.json" // Run as JSON
	EnvFile   = "clusters.env"  // shell variables, for "source"
	CAFile    = "ca.pem"        // CA that signed the SASL_SSL certificates
	markFile  = ".kafka-local"  // marks a folder as ours, so Up may wipe it
)

// Run describes the clusters of one run folder. It is what clusters.json
// holds.
type Run struct {
	KafkaVersion string     `json:"kafka_version"`
	Libs         string     `json:"libs"` // folder of jars; classpath is Libs+"/*"
	Dir          string     `json:"dir"`
	Clusters     []*Cluster `json:"clusters"`
}

// Cluster is one KRaft cluster.
type Cluster struct {
	Name      string `json:"name"` // A, B, C...
	ClusterID string `json:"cluster_id"`
	// Bootstrap lists the PLAINTEXT listeners. With Secure, PLAINTEXT
	// clients are super users (User:ANONYMOUS is in super.users).
	Bootstrap []string `json:"bootstrap"`
	Secure    bool     `json:"secure"`
	// SecureBootstrap lists the SASL_SSL listeners (SCRAM-SHA-512, PLAIN).
	SecureBootstrap []string `json:"secure_bootstrap,omitempty"`
	CAFile          string   `json:"ca_file,omitempty"`
	// ProxyBootstrap lists the addresses the PROXIED listeners advertise
	// (Options.Proxied); they answer only while the caller's proxies run.
	ProxyBootstrap []string `json:"proxy_bootstrap,omitempty"`
	Users          []User   `json:"users,omitempty"`
	Nodes          []*Node  `json:"nodes"`
	// ZooKeeper is the cluster's ZooKeeper for releases before KRaft.
	ZooKeeper *Node `json:"zookeeper,omitempty"`
}

// User is a SASL user known to both the SCRAM-SHA-512 and PLAIN mechanisms.
type User struct {
	Name     string `json:"name"`
	Password string `json:"password"`
	Super    bool   `json:"super"`
}

// Node is one combined broker+controller process.
type Node struct {
	ID         int32 `json:"id"`
	Port       int   `json:"port"` // PLAINTEXT
	SecurePort int   `json:"secure_port,omitempty"`
	// With Options.Proxied: the PROXIED listener's port, and the port it
	// advertises, where a test's proxy forwards to ProxiedPort.
	ProxiedPort    int      `json:"proxied_port,omitempty"`
	ProxyPort      int      `json:"proxy_port,omitempty"`
	ControllerPort int      `json:"controller_port"`
	PID            int      `json:"pid"`
	Dir            string   `json:"dir"` // server.properties, data/, server.log, pid
	Command        []string `json:"command"`
}

// Node returns the node with the given id, or nil.
func (c *Cluster) Node(id int32) *Node {
	for _, n := range c.Nodes {
		if n.ID == id {
			return n
		}
	}
	return nil
}

// Password returns the password of user, or "" if there is no such user.
func (c *Cluster) Password(user string) string {
	for _, u := range c.Users {
		if u.Name == user {
			return u.Password
		}
	}
	return ""
}

// Cluster returns the cluster named name, or nil.
func (r *Run) Cluster(name string) *Cluster {
	for _, c := range r.Clusters {
		if strings.EqualFold(c.Name, name) {
			return c
		}
	}
	return nil
}

// Load reads clusters.json from a run folder, or from the file itself when
// path names a file.
func Load(path string) (*Run, error) {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		path = filepath.Join(path, StateFile)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Run
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("kafkalocal: %s: %w", path, err)
	}
	return &r, nil
}

// Save writes clusters.json and clusters.env into the run folder.
func (r *Run) Save() error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := writeAtomic(filepath.Join(r.Dir, StateFile), append(b, '\n')); err != nil {
		return err
	}
	return writeAtomic(filepath.Join(r.Dir, EnvFile), []byte(r.envFile()))
}

// envFile renders the run as shell assignments.
func (r *Run) envFile() string {
	var b strings.Builder
	kv := func(k, v string) { fmt.Fprintf(&b, "export %s=%s\n", k, shellQuote(v)) }
	kv("KAFKA_VERSION", r.KafkaVersion)
	kv("KAFKA_LIBS", r.Libs)
	kv("KMIRROR_TEST_CLUSTERS", filepath.Join(r.Dir, StateFile))
	var names []string
	for _, c := range r.Clusters {
		names = append(names, c.Name)
		p := "KAFKA_" + c.Name + "_"
		kv(p+"BOOTSTRAP", strings.Join(c.Bootstrap, ","))
		if !c.Secure {
			continue
		}
		kv(p+"SECURE_BOOTSTRAP", strings.Join(c.SecureBootstrap, ","))
		kv(p+"CA_FILE", c.CAFile)
		for _, u := range c.Users {
			kv(p+strings.ToUpper(u.Name)+"_PASSWORD", u.Password)
		}
	}
	kv("KAFKA_CLUSTERS", strings.Join(names, " "))
	return b.String()
}

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func writeAtomic(path string, b []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// nodeDirs returns every node folder (one holding server.properties) under
// dir, at any depth, so Down also finds clusters that tests started in
// sub-folders.
func nodeDirs(dir string) ([]string, error) {
	var dirs []string
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) {
				return nil
			}
			return err
		}
		if d.IsDir() && d.Name() == "data" { // Kafka log dirs: nothing of ours below
			return filepath.SkipDir
		}
		if !d.IsDir() && d.Name() == "server.properties" {
			dirs = append(dirs, filepath.Dir(path))
		}
		return nil
	})
	sort.Strings(dirs)
	return dirs, err
}
