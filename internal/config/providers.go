package config

import (
	"fmt"
	"io"
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

// MaxProviderFileSize caps what the file and directory providers read
// from one file: a reference to a huge file or to a device such as
// /dev/zero must not exhaust memory.
const MaxProviderFileSize = 1 << 20

// Providers are config providers declared by the operator: the
// config.providers* keys of a Connect worker file. ParseOptions.Providers
// resolves a text's ${...} references with them; that text then may not
// declare providers of its own.
type Providers struct {
	m        map[string]provider
	Warnings []string // "FILE:LINE: ..." about the declarations
}

// ParseOptions are Parse's options beyond the text.
type ParseOptions struct {
	// LookupEnv resolves ${env:...} references; nil means os.LookupEnv.
	LookupEnv func(string) (string, bool)
	// Providers, when not nil, are the only providers: config.providers*
	// keys in the text are errors (a connector config may not declare
	// providers, which would let a REST client read the worker's files and
	// environment, CVE-2024-31141).
	Providers *Providers
	// Origins, when not nil, report the keys it lists at these positions
	// (a generated file, see SetOrigins).
	Origins map[string]Origin
}

// ResolveProviders builds the providers that p's config.providers* keys
// declare and replaces the ${...} references of p's other values with
// them, as a Kafka worker resolves its own file. file names p in errors,
// each a *Error, joined.
func ResolveProviders(p *Properties, file string, lookupEnv func(string) (string, bool)) (*Providers, error) {
	if lookupEnv == nil {
		lookupEnv = os.LookupEnv
	}
	var errs errorList
	pr := buildProviders(p, file, lookupEnv, &errs)
	resolveWith(p, file, pr.m, &errs)
	return pr, errs.err()
}

// IsProviderKey reports whether k declares a config provider:
// config.providers or config.providers.*.
func IsProviderKey(k string) bool {
	return k == providersKey || strings.HasPrefix(k, providersKey+".")
}

// resolveProviders replaces ${...} references in every value, except the
// config.providers* keys themselves, with the providers p declares, or
// with o.Providers (and then p may declare none).
func resolveProviders(p *Properties, file string, o ParseOptions, errs *errorList) {
	if o.Providers == nil {
		resolveWith(p, file, buildProviders(p, file, o.LookupEnv, errs).m, errs)
		return
	}
	for _, k := range p.order {
		if IsProviderKey(k) {
			errs.add(&Error{File: file, Line: p.m[k].line, Key: k, Msg: OperatorProvidersOnly})
		}
	}
	resolveWith(p, file, o.Providers.m, errs)
}

// OperatorProvidersOnly is the error of a config.providers* key where only
// the operator may declare providers.
const OperatorProvidersOnly = "config providers are declared by the operator only (config.providers* in the worker file), " +
	"not in a connector config: a REST client could read the worker's files and environment with them (CVE-2024-31141)"

func resolveWith(p *Properties, file string, providers map[string]provider, errs *errorList) {
	for _, k := range p.order {
		if IsProviderKey(k) {
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
func buildProviders(p *Properties, file string, lookupEnv func(string) (string, bool), errs *errorList) *Providers {
	out := &Providers{m: map[string]provider{}}
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
			out.m[name] = nil
			continue
		}
		param := func(k string) (string, bool) { return p.Get(prefix + "param." + k) }
		var pr provider
		var err error
		errKey := classKey
		switch strings.TrimSpace(class) {
		case EnvVarProviderClass, "EnvVarConfigProvider":
			pr, err = envProvider(lookupEnv, param)
			errKey = prefix + "param.allowlist.pattern"
		case FileProviderClass, "FileConfigProvider":
			pr, err = fileProvider(param)
			errKey = prefix + "param.allowed.paths"
		case DirectoryProviderClass, "DirectoryConfigProvider":
			pr, err = dirProvider(param)
			errKey = prefix + "param.allowed.paths"
		default:
			err = fmt.Errorf("unsupported config provider class %q (supported: %s, %s, %s)",
				class, EnvVarProviderClass, FileProviderClass, DirectoryProviderClass)
		}
		if err != nil {
			line := p.Line(errKey)
			if line == 0 {
				errKey, line = classKey, p.Line(classKey)
			}
			errs.add(&Error{File: file, Line: line, Key: errKey, Msg: err.Error()})
			out.m[name] = nil
			continue
		}
		if _, set := param("allowed.paths"); !set && strings.TrimSpace(class) != EnvVarProviderClass && strings.TrimSpace(class) != "EnvVarConfigProvider" {
			out.Warnings = append(out.Warnings, fmt.Sprintf("%s:%d: %s: provider %q reads any file kmirror can read: set %sparam.allowed.paths to the directories it may read",
				file, p.Line(classKey), classKey, name, prefix))
		}
		out.m[name] = pr
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
// providers, as Kafka's AllowedPaths (since 3.8, CVE-2024-31141): a
// comma-separated list of absolute paths that exist; a path a provider
// reads must be one of them or lie beneath one. kmirror also resolves
// symbolic links on both sides, so a link inside an allowed directory
// cannot lead out of it. Without allowed.paths every path is allowed.
func allowedPaths(param func(string) (string, bool)) (func(string) error, error) {
	v, ok := param("allowed.paths")
	if !ok || strings.TrimSpace(v) == "" {
		return func(string) error { return nil }, nil
	}
	var roots []string
	for _, r := range policy.ParseList(v) {
		if !filepath.IsAbs(r) {
			return nil, fmt.Errorf("%q is not an absolute path", r)
		}
		real, err := filepath.EvalSymlinks(filepath.Clean(r))
		if err != nil {
			return nil, fmt.Errorf("%s: %v (each allowed path must be absolute and exist)", r, pathErr(err))
		}
		roots = append(roots, filepath.Clean(r), real)
	}
	within := func(p string) bool {
		for _, r := range roots {
			if p == r || strings.HasPrefix(p, strings.TrimSuffix(r, string(filepath.Separator))+string(filepath.Separator)) {
				return true
			}
		}
		return false
	}
	return func(path string) error {
		abs, err := filepath.Abs(path)
		if err != nil {
			return err
		}
		refused := fmt.Errorf("path %s is not within allowed.paths", path)
		if !within(abs) {
			return refused
		}
		real, err := filepath.EvalSymlinks(abs)
		if err != nil {
			return fmt.Errorf("cannot read %s: %v", path, pathErr(err))
		}
		if !within(real) {
			return refused
		}
		return nil
	}, nil
}

// readCapped reads the regular file path, at most MaxProviderFileSize
// bytes: devices, pipes and directories are refused before they are
// read, and a larger file is an error naming the path and the cap.
func readCapped(path string) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read %s: %v", path, pathErr(err))
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	if st.Size() > MaxProviderFileSize {
		return nil, fmt.Errorf("%s is larger than the %d-byte (1 MiB) cap of config providers", path, MaxProviderFileSize)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read %s: %v", path, pathErr(err))
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxProviderFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("cannot read %s: %v", path, pathErr(err))
	}
	if len(data) > MaxProviderFileSize {
		return nil, fmt.Errorf("%s is larger than the %d-byte (1 MiB) cap of config providers", path, MaxProviderFileSize)
	}
	return data, nil
}

// fileProvider resolves ${file:PATH:KEY}, where PATH is a properties file.
func fileProvider(param func(string) (string, bool)) (provider, error) {
	check, err := allowedPaths(param)
	if err != nil {
		return nil, err
	}
	// No cache: providers of a worker live as long as it does, and a
	// rotated secret file must be read again.
	return func(path, key string) (string, error) {
		if path == "" {
			return "", fmt.Errorf("the file provider needs a path: ${file:PATH:KEY}")
		}
		if err := check(path); err != nil {
			return "", err
		}
		data, err := readCapped(path)
		if err != nil {
			return "", err
		}
		props, err := ParseProperties(path, data)
		if err != nil {
			// The message may quote a key but never a value.
			return "", fmt.Errorf("cannot parse %s: %v", path, err)
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
		f := filepath.Join(path, key)
		if err := check(f); err != nil {
			return "", err
		}
		data, err := readCapped(f)
		if err != nil {
			return "", err
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
