package progress

import "testing"

// FuzzDecodeTopicID feeds the decoders of the progress topic's topic ID
// records whatever a progress topic may hold: they must not panic, and a
// key that decodes must encode back to one that decodes the same.
func FuzzDecodeTopicID(f *testing.F) {
	f.Add(topicIDKey("A", "t1"), topicIDValue("abc"))
	f.Add([]byte(`["kmirror-topic-id",null]`), []byte(`{"id":1}`))
	f.Add([]byte(`["kmirror-topic-id"]`), []byte(`null`))
	f.Fuzz(func(t *testing.T, key, value []byte) {
		if cluster, topic, ok := decodeTopicIDKey(key); ok {
			c2, t2, ok := decodeTopicIDKey(topicIDKey(cluster, topic))
			if !ok || c2 != cluster || t2 != topic {
				t.Fatalf("round trip of %q: %q %q %v", key, c2, t2, ok)
			}
		}
		if id, ok := decodeTopicIDValue(value); ok {
			if id2, ok := decodeTopicIDValue(topicIDValue(id)); !ok || id2 != id {
				t.Fatalf("round trip of %q: %q %v", value, id2, ok)
			}
		}
	})
}
