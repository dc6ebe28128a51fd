package config

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/kmirror/kmirror/internal/policy"
)

// Config provider classes kmirror implements natively.
const (
	EnvVarProviderClass    = "org.apache.kafka.common.config.provider.EnvVarConfigProvider"
	FileProviderClass      = "org.apache.kafka.common.config.provider.FileConfigProvider"
	DirectoryProviderClass = "org.apache.kafka.common.config.provider.DirectoryConfigProvider"
)

const providersKey = "config.providers"

// varPattern matches ${provider:[path:]key}, the syntax of Kafka's
// ConfigTransformer.
var varPattern = regexp.MustCompile(`\$\{([^}]*?):(([^}]*?):)?([^}]*?)\}`)

// provider looks up one variable; the error never contains a value.
type provider func(path, key string) (string, error)

// resolveProviders replaces ${...} references in every value, except the
// config.providers* keys themselves.
func resolveProviders(p *Properties, file string, lookupEnv func(string) (string, bool), errs *errorList) {
	providers := buildProviders(p, file, lookupEnv, errs)
	for _, k := range p.order {
		if k == providersKey || strings.HasPrefix(k, providersKey+".") {
			continue
		}
		e := p.m[k]
		if !strings.Contains(e.value, "${") {
			continue
		}
		var failed bool
		out := varPattern.ReplaceAllStringFunc(e.value, func(ref string) string {
			m := varPattern.FindStringSubmatch(ref)
			name, path, key := m[1], m[3], m[4]
			pr, ok := providers[name]
			if !ok {
				failed = true
				errs.add(&Error{File: file, Line: e.line, Key: k,
					Msg: fmt.Sprintf("cannot resolve %s: config provider %q is not declared in %s", ref, name, providersKey)})
				return ref
			}
			if pr == nil {
				failed = true // provider misconfigured; already reported
				return ref
			}
			v, err := pr(path, key)
			if err != nil {
				failed = true
				errs.add(&Error{File: file, Line: e.line, Key: k, Msg: fmt.Sprintf("cannot resolve %s: %v", ref, err)})
				return ref
			}
			return v
		})
		if !failed && out != e.value {
			e.value, e.resolved = out, true
		}
	}
}

// buildProviders instantiates the providers named in config.providers. A
// misconfigured provider maps to nil after its error has been reported.
func buildProviders(p *Properties, file string, lookupEnv func(string) (string, bool), errs *errorList) map[string]provider {
	out := map[string]provider{}
	list, ok := p.Get(providersKey)
	if !ok {
		return out
	}
	for _, name := range policy.ParseList(list) {
		prefix := providersKey + "." + name + "."
		classKey := prefix + "class"
		class, ok := p.Get(classKey)
		if !ok {
			errs.add(&Error{File: file, Line: p.Line(providersKey), Key: classKey,
				Msg: fmt.Sprintf("config provider %q is listed in %s but has no class", name, providersKey)})
			out[name] = nil
			continue
		}
		param := func(k string) (string, bool) { return p.Get(prefix + "param." + k) }
		var pr provider
		var err error
		switch strings.TrimSpace(class) {
		case EnvVarProviderClass, "EnvVarConfigProvider":
			pr, err = envProvider(lookupEnv, param)
		case FileProviderClass, "FileConfigProvider":
			pr, err = fileProvider(param)
		case DirectoryProviderClass, "DirectoryConfigProvider":
			pr, err = dirProvider(param)
		default:
			err = fmt.Errorf("unsupported config provider class %q (supported: %s, %s, %s)",
				class, EnvVarProviderClass, FileProviderClass, DirectoryProviderClass)
		}
		if err != nil {
			errs.add(&Error{File: file, Line: p.Line(classKey), Key: classKey, Msg: err.Error()})
			out[name] = nil
			continue
		}
		out[name] = pr
	}
	return out
}

// envProvider resolves ${env:NAME}. The optional param allowlist.pattern is
// a regex that variable names must fully match.
func envProvider(lookupEnv func(string) (string, bool), param func(string) (string, bool)) (provider, error) {
	var allow *regexp.Regexp
	if pat, ok := param("allowlist.pattern"); ok {
		re, err := policy.CompilePattern([]string{pat})
		if err != nil {
			return nil, fmt.Errorf("param allowlist.pattern: %v", err)
		}
		allow = re
	}
	return func(path, key string) (string, error) {
		if path != "" {
			return "", fmt.Errorf("the env provider takes no path")
		}
		if allow != nil && !allow.MatchString(key) {
			return "", fmt.Errorf("environment variable %s is not allowed by allowlist.pattern", key)
		}
		v, ok := lookupEnv(key)
		if !ok {
			return "", fmt.Errorf("environment variable %s is not set", key)
		}
		return v, nil
	}, nil
}

// allowedPaths implements the allowed.paths param of the file and directory
// providers: a comma-separated list of absolute directories or files.
func allowedPaths(param func(string) (string, bool)) (func(string) error, error) {
	v, ok := param("allowed.paths")
	if !ok || strings.TrimSpace(v) == "" {
		return func(string) error { return nil }, nil
	}
	var roots []string
	for _, r := range policy.ParseList(v) {
		if !filepath.IsAbs(r) {
			return nil, fmt.Errorf("param allowed.paths: %q is not an absolute path", r)
		}
		roots = append(roots, filepath.Clean(r))
	}
	return func(path string) error {
		abs, err := filepath.Abs(path)
		if err != nil {
			return err
		}
		for _, r := range roots {
			if abs == r || strings.HasPrefix(abs, r+string(filepath.Separator)) {
				return nil
			}
		}
		return fmt.Errorf("path %s is not within allowed.paths", path)
	}, nil
}

// fileProvider resolves ${file:PATH:KEY}, where PATH is a properties file.
func fileProvider(param func(string) (string, bool)) (provider, error) {
	check, err := allowedPaths(param)
	if err != nil {
		return nil, err
	}
	cache := map[string]*Properties{}
	return func(path, key string) (string, error) {
		if path == "" {
			return "", fmt.Errorf("the file provider needs a path: ${file:PATH:KEY}")
		}
		if err := check(path); err != nil {
			return "", err
		}
		props, ok := cache[path]
		if !ok {
			data, err := os.ReadFile(path)
			if err != nil {
				return "", fmt.Errorf("cannot read %s: %v", path, pathErr(err))
			}
			props, err = ParseProperties(path, data)
			if err != nil {
				// The message may quote a key but never a value.
				return "", fmt.Errorf("cannot parse %s: %v", path, err)
			}
			cache[path] = props
		}
		v, ok := props.Get(key)
		if !ok {
			return "", fmt.Errorf("key %q not found in %s", key, path)
		}
		return v, nil
	}, nil
}

// dirProvider resolves ${dir:PATH:FILE} to the contents of PATH/FILE.
func dirProvider(param func(string) (string, bool)) (provider, error) {
	check, err := allowedPaths(param)
	if err != nil {
		return nil, err
	}
	return func(path, key string) (string, error) {
		if path == "" {
			return "", fmt.Errorf("the directory provider needs a path: ${dir:PATH:FILE}")
		}
		if key == "" || strings.ContainsAny(key, `/\`) || key == "." || key == ".." {
			return "", fmt.Errorf("invalid file name %q", key)
		}
		if err := check(path); err != nil {
			return "", err
		}
		f := filepath.Join(path, key)
		st, err := os.Stat(f)
		if err != nil {
			return "", fmt.Errorf("cannot read %s: %v", f, pathErr(err))
		}
		if !st.Mode().IsRegular() {
			return "", fmt.Errorf("%s is not a regular file", f)
		}
		data, err := os.ReadFile(f)
		if err != nil {
			return "", fmt.Errorf("cannot read %s: %v", f, pathErr(err))
		}
		return string(data), nil
	}, nil
}

// pathErr strips the path from *os.PathError, which the caller already names.
func pathErr(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}
