package clients

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func TestParseJAAS(t *testing.T) {
	for _, tc := range []struct {
		name, in     string
		module, flag string
		opts         map[string]string
	}{
		{"scram", `org.apache.kafka.common.security.scram.ScramLoginModule required username="u" password="p";`,
			"org.apache.kafka.common.security.scram.ScramLoginModule", "required", map[string]string{"username": "u", "password": "p"}},
		{"plain bare words and flag case", "org.apache.kafka.common.security.plain.PlainLoginModule REQUIRED username=alice password=al1ce-pw ;",
			"org.apache.kafka.common.security.plain.PlainLoginModule", "required", map[string]string{"username": "alice", "password": "al1ce-pw"}},
		{"single quotes and spaces", `M optional user_name='a b' password = 'x"y' ;`,
			"M", "optional", map[string]string{"user_name": "a b", "password": `x"y`}},
		{"escapes", `M sufficient a="q\"b\\s\n\t\101\0\7777" b='\z';`,
			"M", "sufficient", map[string]string{"a": "q\"b\\s\n\tA\x00\u003f77", "b": "z"}},
		{"empty value", `M requisite password="";`, "M", "requisite", map[string]string{"password": ""}},
		{"no options", `M required;`, "M", "required", map[string]string{}},
		{"multiline with comments", "M required // the module\n  username=\"u\" /* block\n comment */ password=\"p\"\n ;",
			"M", "required", map[string]string{"username": "u", "password": "p"}},
		{"duplicate keys: last wins", `M required k=1 k=2;`, "M", "required", map[string]string{"k": "2"}},
		{"non-ASCII", `M required username="üser" password=pässwörd;`, "M", "required", map[string]string{"username": "üser", "password": "pässwörd"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j, err := ParseJAAS(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, k := range j.OptionNames() {
				got[k], _ = j.Option(k)
			}
			if j.LoginModule != tc.module || j.ControlFlag != tc.flag || !reflect.DeepEqual(got, tc.opts) {
				t.Errorf("got %q %q %q", j.LoginModule, j.ControlFlag, got)
			}
		})
	}
}

func TestParseJAASErrors(t *testing.T) {
	for _, in := range []string{
		``,
		`   `,
		`// only a comment`,
		`M`,
		`M required username="u"`,
		`M required username="u" password="p`, // quote runs to the end: no ';'
		`M mandatory username="u";`,
		`M required username;`,
		`M required username=;`,
		`M required =x;`,
		`; required;`,
		`M ; username=u;`,
		`M required a=b"c";`, // value b then stray quoted "c" as a key without '='
		`M required password=a/b;`,
		`M required u=1; N required u=2;`,
		"M required password=\"x\ny\";",
	} {
		_, err := ParseJAAS(in)
		if !errors.Is(err, errJAAS) {
			t.Errorf("ParseJAAS(%q) err = %v, want errJAAS", in, err)
		}
	}
}

const secret = "S3cr3t-Pa55"

// No error or String of a JAAS config carries option values.
func TestJAASSecretsRedacted(t *testing.T) {
	j, err := ParseJAAS(`M required username="bob" password="` + secret + `";`)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{j.String(), fmt.Sprint(j), fmt.Sprintf("%v %+v %#v %s", j, j, j, &j)} {
		if strings.Contains(s, secret) || strings.Contains(s, "bob") {
			t.Errorf("leaked: %s", s)
		}
	}
	if !strings.Contains(j.String(), "password=[redacted]") {
		t.Errorf("String = %s", j.String())
	}

	for _, in := range []string{
		`M required password=` + secret,
		`M required password="` + secret,
		`M required password=` + secret + ` x;`,
		`M required password ` + secret + `;`,
		`M required ` + secret + `;`,
		`M ` + secret + ` password=x;`,
		secret + `;`,
		`M required password=` + secret + `; N required x=y;`,
		`M required password=a/` + secret + `;`,
		`M required password='` + secret + `' = ;`,
	} {
		_, err := ParseJAAS(in)
		if err == nil {
			t.Errorf("ParseJAAS(%q) succeeded", in)
			continue
		}
		if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), secret[:6]) {
			t.Errorf("error leaks the secret: %v", err)
		}
	}
}
