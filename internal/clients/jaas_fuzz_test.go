package clients

import (
	"errors"
	"testing"
)

// FuzzParseJAAS checks that any sasl.jaas.config value parses or fails
// with an errJAAS, never panics, and that what parses has a login module
// and a control flag.
func FuzzParseJAAS(f *testing.F) {
	for _, s := range []string{
		`org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="a-secret";`,
		`org.apache.kafka.common.security.scram.ScramLoginModule required username='bob' password="p\"w";`,
		"x required /* c */ a=b // d\n;",
		"x optional a=\"unterminated",
		`x required a=b; y required;`,
		"/", "/*", `"\`, "x required a='\\", ";",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		j, err := ParseJAAS(s)
		if err != nil {
			if !errors.Is(err, errJAAS) {
				t.Fatalf("error %v is not an errJAAS", err)
			}
			return
		}
		if j.LoginModule == "" && j.ControlFlag == "" {
			t.Fatalf("parsed %q to an empty entry", s)
		}
		for _, k := range j.OptionNames() {
			if _, ok := j.Option(k); !ok {
				t.Fatalf("option %q listed but missing", k)
			}
		}
	})
}
