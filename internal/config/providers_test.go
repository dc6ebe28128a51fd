package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestProviderLimits: the file and directory providers read regular files
// within allowed.paths only (symbolic links resolved), up to
// MaxProviderFileSize; the env provider reads only the variables its
// allowlist.pattern matches.
func TestProviderLimits(t *testing.T) {
	dir := t.TempDir()
	allowed := filepath.Join(dir, "allowed")
	outside := filepath.Join(dir, "outside")
	for _, d := range []string{allowed, outside, filepath.Join(allowed, "sub")} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	write := func(path, data string) {
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(allowed, "s.properties"), "pw = in-secret\n")
	write(filepath.Join(allowed, "pw"), "in-secret")
	write(filepath.Join(outside, "s.properties"), "pw = out-secret\n")
	write(filepath.Join(outside, "pw"), "out-secret")
	big := strings.Repeat("x", MaxProviderFileSize) + "\n"
	write(filepath.Join(allowed, "big"), big)
	write(filepath.Join(allowed, "big.properties"), "pw = "+big)
	write(filepath.Join(allowed, "max"), strings.Repeat("y", MaxProviderFileSize))
	if err := os.Symlink(filepath.Join(outside, "pw"), filepath.Join(allowed, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(allowed, "linkdir")); err != nil {
		t.Fatal(err)
	}
	env := func(k string) (string, bool) {
		v, ok := map[string]string{"KAFKA_PW": "env-in", "HOME_SECRET": "env-out"}[k]
		return v, ok
	}
	decl := `config.providers = file, dir, env, anyfile, anyenv
config.providers.file.class = FileConfigProvider
config.providers.file.param.allowed.paths = ` + allowed + `
config.providers.dir.class = org.apache.kafka.common.config.provider.DirectoryConfigProvider
config.providers.dir.param.allowed.paths = ` + allowed + `
config.providers.env.class = EnvVarConfigProvider
config.providers.env.param.allowlist.pattern = KAFKA_.*
config.providers.anyfile.class = FileConfigProvider
config.providers.anyenv.class = EnvVarConfigProvider
`
	tests := []struct {
		name, ref string
		want      string // the value, or with err a part of the error
		err       bool
	}{
		{"file within allowed.paths", "${file:" + allowed + "/s.properties:pw}", "in-secret", false},
		{"file outside allowed.paths", "${file:" + outside + "/s.properties:pw}", "is not within allowed.paths", true},
		{"file escaping by ..", "${file:" + allowed + "/../outside/s.properties:pw}", "is not within allowed.paths", true},
		{"file through a directory link", "${file:" + allowed + "/linkdir/s.properties:pw}", "is not within allowed.paths", true},
		{"file too large", "${file:" + allowed + "/big.properties:pw}", "big.properties is larger than the 1048576-byte (1 MiB) cap", true},
		{"file is a directory", "${file:" + allowed + "/sub:pw}", "sub is not a regular file", true},
		{"file is a device (no allowed.paths)", "${anyfile:/dev/zero:pw}", "/dev/zero is not a regular file", true},
		{"file anywhere without allowed.paths", "${anyfile:" + outside + "/s.properties:pw}", "out-secret", false},
		{"dir within allowed.paths", "${dir:" + allowed + ":pw}", "in-secret", false},
		{"dir exactly at the cap", "${dir:" + allowed + ":max}", strings.Repeat("y", MaxProviderFileSize), false},
		{"dir over the cap", "${dir:" + allowed + ":big}", allowed + "/big is larger than the 1048576-byte (1 MiB) cap of config providers", true},
		{"dir outside allowed.paths", "${dir:" + outside + ":pw}", "is not within allowed.paths", true},
		{"dir link leading out", "${dir:" + allowed + ":link}", "is not within allowed.paths", true},
		{"dir file name with ..", "${dir:" + allowed + ":..}", `invalid file name ".."`, true},
		{"dir subdirectory", "${dir:" + allowed + ":sub}", "is not a regular file", true},
		{"env in allowlist", "${env:KAFKA_PW}", "env-in", false},
		{"env outside allowlist", "${env:HOME_SECRET}", "environment variable HOME_SECRET is not allowed by allowlist.pattern", true},
		{"env without allowlist", "${anyenv:HOME_SECRET}", "env-out", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := ParseProperties("worker.properties", []byte(decl+"x = "+tt.ref+"\n"))
			if err != nil {
				t.Fatal(err)
			}
			_, err = ResolveProviders(p, "worker.properties", env)
			got, _ := p.Get("x")
			if tt.err {
				if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "worker.properties:10: x: cannot resolve") {
					t.Fatalf("error %v, want one containing %q", err, tt.want)
				}
				for _, secret := range []string{"out-secret", "in-secret", "env-out", "xxxxxxxx"} {
					if strings.Contains(err.Error(), secret) {
						t.Errorf("error shows a value: %v", err)
					}
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("x = %.40q, %v; want %.40q", got, err, tt.want)
			}
		})
	}
}

// TestProviderDeclarationErrors: allowed.paths must be absolute and exist
// (as Kafka's AllowedPaths); errors name the param key. Without
// allowed.paths the file and directory providers draw a warning.
func TestProviderDeclarationErrors(t *testing.T) {
	dir := t.TempDir()
	tests := []struct{ text, want string }{
		{"config.providers = f\nconfig.providers.f.class = FileConfigProvider\nconfig.providers.f.param.allowed.paths = relative/dir\n",
			`w:3: config.providers.f.param.allowed.paths: "relative/dir" is not an absolute path`},
		{"config.providers = d\nconfig.providers.d.class = DirectoryConfigProvider\nconfig.providers.d.param.allowed.paths = " + dir + ", " + dir + "/none\n",
			"w:3: config.providers.d.param.allowed.paths: " + dir + "/none: no such file or directory"},
		{"config.providers = e\nconfig.providers.e.class = EnvVarConfigProvider\nconfig.providers.e.param.allowlist.pattern = (\n",
			"w:3: config.providers.e.param.allowlist.pattern: param allowlist.pattern"},
	}
	for _, tt := range tests {
		p, err := ParseProperties("w", []byte(tt.text))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ResolveProviders(p, "w", nil); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("error %v, want %q", err, tt.want)
		}
	}
	p, _ := ParseProperties("w", []byte("config.providers = f\nconfig.providers.f.class = FileConfigProvider\n"))
	pr, err := ResolveProviders(p, "w", nil)
	if err != nil || len(pr.Warnings) != 1 || !strings.Contains(pr.Warnings[0], "w:2: config.providers.f.class: provider \"f\" reads any file kmirror can read: set config.providers.f.param.allowed.paths") {
		t.Errorf("warnings %q, %v", pr.Warnings, err)
	}
}

// TestOperatorProviders: with ParseOptions.Providers, a text that declares
// providers (a connector config) is refused naming each key, and its
// references resolve through the operator's providers only.
func TestOperatorProviders(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "s.properties"), []byte("servers = a:9092\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	wp, _ := ParseProperties("worker.properties", []byte("config.providers = file\nconfig.providers.file.class = FileConfigProvider\nconfig.providers.file.param.allowed.paths = "+dir+"\n"))
	ops, err := ResolveProviders(wp, "worker.properties", nil)
	if err != nil {
		t.Fatal(err)
	}
	base := "clusters = A, B\nA->B.enabled = true\nB.bootstrap.servers = b:9092\n"
	tests := []struct {
		name, text, want string
	}{
		{"operator's provider", "A.bootstrap.servers = ${file:" + dir + "/s.properties:servers}\n", ""},
		{"outside the operator's allowed.paths", "A.bootstrap.servers = ${file:/etc/hosts:x}\n", "A.bootstrap.servers: cannot resolve ${file:/etc/hosts:x}: path /etc/hosts is not within allowed.paths"},
		{"own provider declared", "A.bootstrap.servers = a:9092\nconfig.providers = d\nconfig.providers.d.class = DirectoryConfigProvider\n",
			"c:5: config.providers: " + OperatorProvidersOnly},
		{"own provider's class", "A.bootstrap.servers = a:9092\nconfig.providers.file.class = DirectoryConfigProvider\n", "c:5: config.providers.file.class: config providers are declared by the operator only"},
		{"provider not declared by the operator", "A.bootstrap.servers = ${e:HOME}\n", `config provider "e" is not declared`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ParseWith("c", []byte(base+tt.text), ParseOptions{Providers: ops})
			if tt.want == "" {
				if err != nil || c.Flows[0].SourceConsumer["bootstrap.servers"] != "a:9092" {
					t.Fatalf("%v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want %q", err, tt.want)
			}
			var ce *Error
			if !errors.As(err, &ce) {
				t.Errorf("%T is not an *Error", err)
			}
		})
	}
}
