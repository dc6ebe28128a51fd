package clients

import (
	"strings"
	"testing"
)

// TestGSSAPIErrors checks that bad Krb5LoginModule settings fail early,
// naming the key or option. Logins against a real KDC are in e2e.
func TestGSSAPIErrors(t *testing.T) {
	conf := writeFile(t, "krb5.conf", "[libdefaults]\n default_realm = KMIRROR.TEST\n")
	noRealm := writeFile(t, "norealm.conf", "[libdefaults]\n dns_lookup_kdc = false\n")
	notKeytab := writeFile(t, "bad.keytab", "not a key tab")
	const module = "com.sun.security.auth.module.Krb5LoginModule required "
	for _, tc := range []struct {
		name, krb5, jaas, service, want string
	}{
		{"other module", conf, `org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="p";`, "kafka", "needs com.sun.security.auth.module.Krb5LoginModule"},
		{"no service name", conf, module + `useKeyTab=true keyTab="` + notKeytab + `" principal="u";`, "", "sasl.kerberos.service.name is required"},
		{"no credentials", conf, module + `storeKey=true;`, "kafka", "needs useKeyTab=true"},
		{"key tab without principal", conf, module + `useKeyTab=true keyTab="` + notKeytab + `";`, "kafka", "needs keyTab and principal"},
		{"bad key tab", conf, module + `useKeyTab=true keyTab="` + notKeytab + `" principal="u";`, "kafka", "keyTab " + notKeytab},
		{"missing ticket cache", conf, module + `useTicketCache=true ticketCache="/nonexistent/cc";`, "kafka", "ticket cache /nonexistent/cc"},
		{"missing krb5.conf", "/nonexistent/krb5.conf", module + `useTicketCache=true;`, "kafka", "Kerberos config /nonexistent/krb5.conf"},
		{"service name from the JAAS entry", noRealm, module + `serviceName=kafka useKeyTab=true keyTab="` + notKeytab + `" principal="u";`, "", "keyTab"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("KRB5_CONFIG", tc.krb5)
			t.Setenv("KAFKA_OPTS", "")
			props := withSeed("security.protocol", "SASL_PLAINTEXT", "sasl.mechanism", "GSSAPI", "sasl.jaas.config", tc.jaas)
			if tc.service != "" {
				props["sasl.kerberos.service.name"] = tc.service
			}
			_, err := Options(props)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestKrb5ConfPath(t *testing.T) {
	for _, tc := range []struct{ kafkaOpts, krb5Config, want string }{
		{"-Xmx1g -Djava.security.krb5.conf=/etc/kafka/krb5.conf", "/other", "/etc/kafka/krb5.conf"},
		{"", "/a/krb5.conf:/b/krb5.conf", "/a/krb5.conf"},
		{"", "", "/etc/krb5.conf"},
	} {
		t.Setenv("KAFKA_OPTS", tc.kafkaOpts)
		t.Setenv("KRB5_CONFIG", tc.krb5Config)
		if got := krb5ConfPath(); got != tc.want {
			t.Errorf("KAFKA_OPTS=%q KRB5_CONFIG=%q: %s, want %s", tc.kafkaOpts, tc.krb5Config, got, tc.want)
		}
	}
}
