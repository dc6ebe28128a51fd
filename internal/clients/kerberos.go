package clients

import (
	"fmt"
	"os"
	"strings"

	krbclient "github.com/jcmturner/gokrb5/v8/client"
	krbconfig "github.com/jcmturner/gokrb5/v8/config"
	"github.com/jcmturner/gokrb5/v8/credentials"
	"github.com/jcmturner/gokrb5/v8/keytab"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/kerberos"
)

// krb5LoginModule is the JAAS login module MM2 configs use for GSSAPI.
const krb5LoginModule = "com.sun.security.auth.module.Krb5LoginModule"

// gssapi builds the GSSAPI mechanism from a Krb5LoginModule entry: a key
// tab (useKeyTab=true keyTab=... principal=...) or a ticket cache
// (useTicketCache=true, optional ticketCache=...), and the service name
// from sasl.kerberos.service.name or the entry's serviceName option.
func (b *builder) gssapi(j JAAS) (sasl.Mechanism, error) {
	if j.LoginModule != krb5LoginModule {
		return nil, fmt.Errorf("sasl.jaas.config: sasl.mechanism=GSSAPI needs %s, not %s", krb5LoginModule, j.LoginModule)
	}
	service, _ := b.get("sasl.kerberos.service.name")
	if service = strings.TrimSpace(service); service == "" {
		service, _ = j.Option("serviceName")
	}
	if service == "" {
		return nil, fmt.Errorf("sasl.kerberos.service.name is required for sasl.mechanism=GSSAPI (the brokers' Kerberos service, usually kafka)")
	}
	confPath := krb5ConfPath()
	cfg, err := krbconfig.Load(confPath)
	if err != nil {
		return nil, fmt.Errorf("sasl.mechanism=GSSAPI: Kerberos config %s: %w", confPath, err)
	}
	opt := func(name string) bool { v, _ := j.Option(name); return strings.EqualFold(v, "true") }
	var cl *krbclient.Client
	switch {
	case opt("useKeyTab"):
		path, _ := j.Option("keyTab")
		principal, _ := j.Option("principal")
		if path == "" || principal == "" {
			return nil, fmt.Errorf("sasl.jaas.config: %s with useKeyTab=true needs keyTab and principal options", krb5LoginModule)
		}
		kt, err := keytab.Load(path)
		if err != nil {
			return nil, fmt.Errorf("sasl.jaas.config: keyTab %s: %w", path, err)
		}
		name, realm := splitPrincipal(principal, cfg.LibDefaults.DefaultRealm)
		if realm == "" {
			return nil, fmt.Errorf("sasl.jaas.config: principal %s has no realm and %s sets no default_realm", principal, confPath)
		}
		cl = krbclient.NewWithKeytab(name, realm, kt, cfg, krbclient.DisablePAFXFAST(true))
	case opt("useTicketCache"):
		path, _ := j.Option("ticketCache")
		if path == "" {
			path = defaultTicketCache()
		}
		cc, err := credentials.LoadCCache(path)
		if err != nil {
			return nil, fmt.Errorf("sasl.jaas.config: ticket cache %s: %w", path, err)
		}
		if cl, err = krbclient.NewFromCCache(cc, cfg, krbclient.DisablePAFXFAST(true)); err != nil {
			return nil, fmt.Errorf("sasl.jaas.config: ticket cache %s: %w", path, err)
		}
	default:
		return nil, fmt.Errorf("sasl.jaas.config: %s needs useKeyTab=true (with keyTab and principal) or useTicketCache=true", krb5LoginModule)
	}
	return kerberos.Auth{Client: cl, Service: service, PersistAfterAuth: true}.AsMechanism(), nil
}

// krb5ConfPath finds krb5.conf as the JVM of an MM2 started with KAFKA_OPTS
// would, then as MIT tools do: -Djava.security.krb5.conf in KAFKA_OPTS,
// then $KRB5_CONFIG, then /etc/krb5.conf.
func krb5ConfPath() string {
	for _, f := range strings.Fields(os.Getenv("KAFKA_OPTS")) {
		if p, ok := strings.CutPrefix(f, "-Djava.security.krb5.conf="); ok && p != "" {
			return p
		}
	}
	if p := os.Getenv("KRB5_CONFIG"); p != "" {
		return strings.Split(p, ":")[0]
	}
	return "/etc/krb5.conf"
}

// defaultTicketCache is $KRB5CCNAME (file caches only) or /tmp/krb5cc_<uid>.
func defaultTicketCache() string {
	if p := os.Getenv("KRB5CCNAME"); p != "" {
		return strings.TrimPrefix(p, "FILE:")
	}
	return fmt.Sprintf("/tmp/krb5cc_%d", os.Getuid())
}

// splitPrincipal splits "name/instance@REALM" into name and realm.
func splitPrincipal(p, defaultRealm string) (name, realm string) {
	if i := strings.LastIndexByte(p, '@'); i >= 0 {
		return p[:i], p[i+1:]
	}
	return p, defaultRealm
}
