package config

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

const kmirrorBase = "clusters = A, B\nA.bootstrap.servers = a:1\nB.bootstrap.servers = b:1\nA->B.enabled = true\n"

// TestKmirrorKeys reads every kmirror.* flow key: good values give the typed
// field, bad ones an error at file:line:key (line 5 is the first line after
// kmirrorBase).
func TestKmirrorKeys(t *testing.T) {
	tests := []struct {
		name, line string
		get        func(*Flow) any
		want       any
		err        string // substring of the error; "" for none
	}{
		{"passthrough default", "", func(f *Flow) any { return f.Passthrough }, Auto, ""},
		{"passthrough auto", PassthroughKey + " = AUTO", func(f *Flow) any { return f.Passthrough }, Auto, ""},
		{"passthrough true", "A->B." + PassthroughKey + " = true", func(f *Flow) any { return f.Passthrough }, On, ""},
		{"passthrough false", PassthroughKey + " = False ", func(f *Flow) any { return f.Passthrough }, Off, ""},
		{"passthrough bad", PassthroughKey + " = yes", nil, nil, "mm2.properties:5: " + PassthroughKey + `: want true, false or auto, not "yes"`},

		{"fetches default", "", func(f *Flow) any { return f.FetchesPerBroker }, 0, ""},
		{"fetches top level", FetchesKey + " = 4", func(f *Flow) any { return f.FetchesPerBroker }, 4, ""},
		{"fetches per flow", "A->B." + FetchesKey + " = 1", func(f *Flow) any { return f.FetchesPerBroker }, 1, ""},
		{"fetches most", FetchesKey + " = 8", func(f *Flow) any { return f.FetchesPerBroker }, MaxFetchesPerBroker, ""},
		{"fetches zero", FetchesKey + " = 0", nil, nil, "mm2.properties:5: " + FetchesKey + ": want a whole number from 1 to 8"},
		{"fetches too many", "A->B." + FetchesKey + " = 9", nil, nil, "mm2.properties:5: A->B." + FetchesKey},
		{"fetches not a number", FetchesKey + " = two", nil, nil, `not "two"`},

		{"workers default", "", func(f *Flow) any { return f.Workers }, Single, ""},
		{"workers single", WorkersKey + " = single", func(f *Flow) any { return f.Workers }, Single, ""},
		{"workers group", WorkersKey + " = group ", func(f *Flow) any { return f.Workers }, Group, ""},
		{"workers bad", WorkersKey + " = many", nil, nil, "mm2.properties:5: " + WorkersKey + `: want single or group, not "many"`},
		{"group id default", "", func(f *Flow) any { return f.WorkersGroupID }, "kmirror-A->B", ""},
		{"group id set", "A->B." + WorkersGroupIDKey + " = g1 ", func(f *Flow) any { return f.WorkersGroupID }, "g1", ""},

		{"start group unset", "", func(f *Flow) any { return f.StartFromGroup }, "", ""},
		{"start group", StartGroupKey + " = mm1 ", func(f *Flow) any { return f.StartFromGroup }, "mm1", ""},

		{"throttle unset", "", func(f *Flow) any { return f.ThrottleBytesPerSecond }, int64(0), ""},
		{"throttle set", "A->B." + ThrottleKey + " = 500000", func(f *Flow) any { return f.ThrottleBytesPerSecond }, int64(500000), ""},
		{"throttle zero", ThrottleKey + " = 0", func(f *Flow) any { return f.ThrottleBytesPerSecond }, int64(0), ""},
		{"throttle negative", ThrottleKey + " = -1", nil, nil, "mm2.properties:5: " + ThrottleKey + ": want a whole number of bytes per second"},
		{"throttle bad", "A->B." + ThrottleKey + " = fast", nil, nil, `mm2.properties:5: A->B.` + ThrottleKey + `: want a whole number of bytes per second, not "fast"`},

		{"provenance unset", "", func(f *Flow) any { return f.Provenance }, Auto, ""},
		{"provenance true", ProvenanceKey + " = true", func(f *Flow) any { return f.Provenance }, On, ""},
		{"provenance false", "A->B." + ProvenanceKey + " = false", func(f *Flow) any { return f.Provenance }, Off, ""},
		{"provenance bad", ProvenanceKey + " = maybe", nil, nil, "mm2.properties:5: " + ProvenanceKey + ": want true or false"},

		{"translation default", "", func(f *Flow) any { return f.OffsetTranslation }, TranslationExact, ""},
		{"translation exact", OffsetTranslationKey + " = exact", func(f *Flow) any { return f.OffsetTranslation }, TranslationExact, ""},
		{"translation mm2", "A->B." + OffsetTranslationKey + " = mm2 ", func(f *Flow) any { return f.OffsetTranslation }, TranslationMM2, ""},
		{"translation bad", OffsetTranslationKey + " = fuzzy", nil, nil, "mm2.properties:5: " + OffsetTranslationKey + `: must be exact or mm2, not "fuzzy"`},

		{"index retention unset", "", func(f *Flow) any { return f.OffsetIndexRetention }, time.Duration(0), ""},
		{"index retention", OffsetIndexRetentionKey + " = 60000", func(f *Flow) any { return f.OffsetIndexRetention }, time.Minute, ""},
		{"index retention forever", OffsetIndexRetentionKey + " = -1", func(f *Flow) any { return f.OffsetIndexRetention }, -time.Millisecond, ""},
		{"index retention zero", OffsetIndexRetentionKey + " = 0", nil, nil, "mm2.properties:5: " + OffsetIndexRetentionKey + ": must be a positive number of milliseconds or -1"},
		{"index retention bad", "A->B." + OffsetIndexRetentionKey + " = week", nil, nil, "mm2.properties:5: A->B." + OffsetIndexRetentionKey},

		{"max syncs unset", "", func(f *Flow) any { return f.MaxSyncsPerPartition }, 0, ""},
		{"max syncs", MaxSyncsKey + " = 4", func(f *Flow) any { return f.MaxSyncsPerPartition }, 4, ""},
		{"max syncs too few", MaxSyncsKey + " = 3", nil, nil, "mm2.properties:5: " + MaxSyncsKey + ": must be a number of at least 4"},

		{"exactly once off", "", func(f *Flow) any { return f.ExactlyOnce }, false, ""},
		{"exactly once", "B.exactly.once.source.support = enabled", func(f *Flow) any { return f.ExactlyOnce }, true, ""},
		{"exactly once preparing", "B.exactly.once.source.support = preparing", func(f *Flow) any { return f.ExactlyOnce }, false, ""},

		{"flush default", "", func(f *Flow) any { return f.OffsetFlushInterval }, DefaultOffsetFlushInterval, ""},
		{"flush set", "B.offset.flush.interval.ms = 250", func(f *Flow) any { return f.OffsetFlushInterval }, 250 * time.Millisecond, ""},
		{"flush not positive", "B.offset.flush.interval.ms = 0", nil, nil, "mm2.properties:5: B.offset.flush.interval.ms: 0 is out of range"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse("mm2.properties", []byte(kmirrorBase+tt.line+"\n"), noEnv)
			if tt.err != "" {
				var ce *Error
				if err == nil || !strings.Contains(err.Error(), tt.err) || !errors.As(err, &ce) {
					t.Fatalf("error %v, want a *config.Error containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := tt.get(c.Flows[0]); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
			if len(c.Warnings) != 0 {
				t.Errorf("warnings %q", c.Warnings)
			}
		})
	}
}

func TestKmirrorKeyWarnings(t *testing.T) {
	tests := []struct {
		name, line, warning string
	}{
		{"unknown top level", "kmirror.fetches = 2", `mm2.properties:5: unknown kmirror key "kmirror.fetches"`},
		{"unknown per flow", "A->B.kmirror.throttle = 1", `mm2.properties:5: unknown kmirror key "A->B.kmirror.throttle"`},
		{"REST per flow", "A->B." + RESTListenerKey + " = :8080", `mm2.properties:5: "A->B.kmirror.rest.listener" is read only at top level`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustParse(t, kmirrorBase+tt.line+"\n")
			if !hasWarning(c, tt.warning) {
				t.Errorf("warnings %q, want %q", c.Warnings, tt.warning)
			}
		})
	}
}

func TestREST(t *testing.T) {
	tests := []struct {
		name, lines string
		want        REST
		err         string
	}{
		{"unset", "", REST{}, ""},
		{"token", RESTListenerKey + " = 127.0.0.1:8080 \n" + RESTTokenKey + " = s3cret\n" + RESTAuthKey + " = token",
			REST{Listener: "127.0.0.1:8080", Token: "s3cret"}, ""},
		{"open", RESTListenerKey + " = :1\n" + RESTAuthKey + " = none", REST{Listener: ":1", Open: true}, ""},
		{"https", RESTCertKey + " = c.pem\n" + RESTKeyKey + " = k.pem", REST{TLSCert: "c.pem", TLSKey: "k.pem"}, ""},
		{"bad auth", RESTAuthKey + " = basic", REST{}, "mm2.properties:5: " + RESTAuthKey + `: want token or none, not "basic"`},
		{"cert without key", RESTCertKey + " = c.pem", REST{}, "mm2.properties:5: " + RESTCertKey + ": HTTPS needs " + RESTKeyKey + " too"},
		{"key without cert", RESTKeyKey + " = k.pem", REST{}, "mm2.properties:5: " + RESTKeyKey + ": HTTPS needs " + RESTCertKey + " too"},
		{"allowed hosts", RESTAllowedHostsKey + " = kmirror.internal, Mirror.Example.com. ,", REST{AllowedHosts: []string{"kmirror.internal", "mirror.example.com"}}, ""},
		{"allowed host with port", RESTAllowedHostsKey + " = kmirror.internal:8080", REST{}, "mm2.properties:5: " + RESTAllowedHostsKey + `: want host names without scheme, port or wildcard, not "kmirror.internal:8080"`},
		{"allowed host wildcard", RESTAllowedHostsKey + " = *", REST{}, "mm2.properties:5: " + RESTAllowedHostsKey + ": want host names"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse("mm2.properties", []byte(kmirrorBase+tt.lines+"\n"), noEnv)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want %q", err, tt.err)
				}
				if strings.Contains(err.Error(), "s3cret") {
					t.Error("token in the error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(c.REST, tt.want) {
				t.Errorf("got %+v, want %+v", c.REST, tt.want)
			}
			if len(c.Warnings) != 0 {
				t.Errorf("warnings %q", c.Warnings)
			}
		})
	}
}

func TestPolicyAndFiltersBuiltOnce(t *testing.T) {
	c := mustParse(t, kmirrorBase+"A->B.topics = orders.*\nA->B.groups.exclude = g.*\nA->B.config.properties.exclude = retention\\\\.ms\n")
	f := c.Flows[0]
	if !f.TopicFilter.Match("orders1") || f.TopicFilter.Match("x") {
		t.Error("topic filter")
	}
	if f.GroupFilter.Match("g1") || !f.GroupFilter.Match("h1") {
		t.Error("group filter")
	}
	if !f.ConfigExclude.MatchString("retention.ms") || f.ConfigExclude.MatchString("cleanup.policy") {
		t.Error("config exclude")
	}
	if f.Policy.FormatRemoteTopic("A", "t") != "A.t" || f.OffsetSyncsTopic() != "mm2-offset-syncs.A.internal" {
		t.Error("policy")
	}
	_, err := Parse("mm2.properties", []byte(kmirrorBase+"A->B.topics = (\n"), noEnv)
	if err == nil || !strings.Contains(err.Error(), "mm2.properties:5: A->B.topics") {
		t.Errorf("bad regex: %v", err)
	}
}
