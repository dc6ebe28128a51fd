package config

import (
	"fmt"
	"testing"
)

// flowKmirror is every field that builder.kmirror sets, for comparison.
func flowKmirror(f *Flow) string {
	return fmt.Sprintf("passthrough=%v fetches=%d workers=%v group=%s start=%q throttle=%d provenance=%v translation=%v "+
		"retention=%v syncs=%d eos=%t stall=%v lag=%v flush=%v slots=%d",
		f.Passthrough, f.FetchesPerBroker, f.Workers, f.WorkersGroupID, f.StartFromGroup, f.ThrottleBytesPerSecond,
		f.Provenance, f.OffsetTranslation, f.OffsetIndexRetention, f.MaxSyncsPerPartition, f.ExactlyOnce,
		f.StallTimeout, f.LagThreshold, f.OffsetFlushInterval, f.Slots)
}

// TestKmirrorExact pins builder.kmirror: all the fields it sets for a
// set of lines, or the whole error text of Parse, several errors at once
// included (line 5 is the first line after kmirrorBase).
func TestKmirrorExact(t *testing.T) {
	const defaults = "passthrough=auto fetches=0 workers=single group=kmirror-A->B start=\"\" throttle=0 provenance=auto translation=exact " +
		"retention=0s syncs=0 eos=false stall=1m0s lag=30s flush=1s slots=16"
	env := func(k string) (string, bool) {
		v, ok := map[string]string{"SLOTS": "0", "FETCHES": "x"}[k]
		return v, ok
	}
	tests := []struct {
		name, lines string
		want        string // the fields, when Parse succeeds
		err         string // the whole error text
	}{
		{name: "defaults", want: defaults},
		{name: "empty values count as unset",
			lines: PassthroughKey + " =\n" + FetchesKey + " =\n" + WorkersKey + " =\n" + WorkersGroupIDKey + " =\n" + ThrottleKey + " =\n" +
				ProvenanceKey + " =\n" + OffsetTranslationKey + " =\n" + OffsetIndexRetentionKey + " =\n" + MaxSyncsKey + " =\n",
			want: defaults},
		{name: "all set",
			lines: "A->B." + PassthroughKey + " = FALSE\n" + FetchesKey + " = 3\n" + WorkersKey + " = Group\n" +
				"A->B." + WorkersGroupIDKey + " = g7\n" + StartGroupKey + " = mm1\n" + ThrottleKey + " = 1000\n" +
				ProvenanceKey + " = TRUE\n" + OffsetTranslationKey + " = mm2\n" + OffsetIndexRetentionKey + " = -1\n" +
				MaxSyncsKey + " = 9\n" + "B.exactly.once.source.support = ENABLED\n" + StallTimeoutKey + " = 5000\n" +
				"A->B." + LagThresholdKey + " = 250\n" + "B.offset.flush.interval.ms = 100\n" + SlotsKey + " = 1024\n",
			want: "passthrough=false fetches=3 workers=group group=g7 start=\"mm1\" throttle=1000 provenance=true translation=mm2 " +
				"retention=-1ms syncs=9 eos=true stall=5s lag=250ms flush=100ms slots=1024"},
		{name: "passthrough true, provenance false",
			lines: PassthroughKey + " = true\n" + ProvenanceKey + " = 0\n" + OffsetIndexRetentionKey + " = 1\n",
			want: "passthrough=true fetches=0 workers=single group=kmirror-A->B start=\"\" throttle=0 provenance=false translation=exact " +
				"retention=1ms syncs=0 eos=false stall=1m0s lag=30s flush=1s slots=16"},
		{name: "every key wrong",
			lines: PassthroughKey + " = yes\n" + FetchesKey + " = 9\n" + WorkersKey + " = all\n" + ThrottleKey + " = -5\n" +
				ProvenanceKey + " = maybe\n" + OffsetTranslationKey + " = fuzzy\n" + OffsetIndexRetentionKey + " = 0\n" +
				MaxSyncsKey + " = 3\n" + "B.exactly.once.source.support = on\n" + StallTimeoutKey + " = 0\n" +
				LagThresholdKey + " = soon\n" + "B.offset.flush.interval.ms = -1\n" + SlotsKey + " = 1025\n",
			err: `mm2.properties:5: kmirror.passthrough.enabled: want true, false or auto, not "yes"` + "\n" +
				`mm2.properties:6: kmirror.fetches.per.broker: want a whole number from 1 to 8, not "9"` + "\n" +
				`mm2.properties:7: kmirror.workers: want single or group, not "all"` + "\n" +
				`mm2.properties:8: kmirror.throttle.bytes.per.second: want a whole number of bytes per second, not "-5"` + "\n" +
				`mm2.properties:9: kmirror.provenance.header.enabled: want true or false, not "maybe"` + "\n" +
				`mm2.properties:10: kmirror.offset.translation: must be exact or mm2, not "fuzzy"` + "\n" +
				`mm2.properties:11: kmirror.offset.index.retention.ms: must be a positive number of milliseconds or -1` + "\n" +
				`mm2.properties:12: kmirror.offset.translation.max.syncs.per.partition: must be a number of at least 4` + "\n" +
				`mm2.properties:13: B.exactly.once.source.support: invalid value "on" (expected one of: enabled, disabled, preparing)` + "\n" +
				`mm2.properties:14: kmirror.partition.stall.timeout.ms: 0 is out of range: must be a positive number of milliseconds` + "\n" +
				`mm2.properties:15: kmirror.partition.lag.threshold.ms: invalid number "soon"` + "\n" +
				`mm2.properties:16: B.offset.flush.interval.ms: -1 is out of range: must be from 1 to 9223372036854 milliseconds` + "\n" +
				`mm2.properties:17: kmirror.exactly.once.slots: 1025 is out of range: must be a whole number from 1 to 1024`},
		{name: "per-flow keys and limits",
			lines: "A->B." + FetchesKey + " = 0\n" + "A->B." + OffsetIndexRetentionKey + " = 9223372036855\n" +
				"A->B." + SlotsKey + " = 0\n" + "A->B." + MaxSyncsKey + " = many\n",
			err: `mm2.properties:5: A->B.kmirror.fetches.per.broker: want a whole number from 1 to 8, not "0"` + "\n" +
				`mm2.properties:6: A->B.kmirror.offset.index.retention.ms: must be a positive number of milliseconds or -1` + "\n" +
				`mm2.properties:7: A->B.kmirror.exactly.once.slots: 0 is out of range: must be a whole number from 1 to 1024` + "\n" +
				`mm2.properties:8: A->B.kmirror.offset.translation.max.syncs.per.partition: must be a number of at least 4`},
		{name: "values from a provider stay hidden",
			lines: "config.providers = env\nconfig.providers.env.class = org.apache.kafka.common.config.provider.EnvVarConfigProvider\n" +
				SlotsKey + " = ${env:SLOTS}\n" + FetchesKey + " = ${env:FETCHES}\n",
			err: `mm2.properties:7: kmirror.exactly.once.slots: "${env:SLOTS}" is out of range: must be a whole number from 1 to 1024` + "\n" +
				`mm2.properties:8: kmirror.fetches.per.broker: want a whole number from 1 to 8, not "${env:FETCHES}"`},
		{name: "end-of-line comment",
			lines: WorkersKey + " = group # spread the work\n",
			err:   `mm2.properties:5: kmirror.workers: want single or group, not "group # spread the work" (.properties files have no end-of-line comments)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse("mm2.properties", []byte(kmirrorBase+tt.lines), env)
			if tt.err != "" {
				if err == nil || err.Error() != tt.err {
					t.Fatalf("error\n%v\nwant\n%s", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := flowKmirror(c.Flows[0]); got != tt.want {
				t.Errorf("got\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}
