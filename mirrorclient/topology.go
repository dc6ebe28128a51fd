package mirrorclient

import (
	"slices"

	"github.com/kmirror/kmirror/internal/policy"
)

// The functions below compute MirrorClient's answers from a topic list.

func heartbeatTopics(p policy.Policy, topics []string) []string {
	return filterSorted(topics, p.IsHeartbeatsTopic)
}

func checkpointTopics(p policy.Policy, topics []string) []string {
	return filterSorted(topics, p.IsCheckpointsTopic)
}

// isRemoteTopic: not internal and replicated from somewhere.
func isRemoteTopic(p policy.Policy, topic string) bool {
	if p.IsInternalTopic(topic) {
		return false
	}
	_, ok := p.TopicSource(topic)
	return ok
}

// remoteTopics returns the remote topics, only those whose direct source is
// source unless source is "".
func remoteTopics(p policy.Policy, topics []string, source string) []string {
	return filterSorted(topics, func(t string) bool {
		if !isRemoteTopic(p, t) {
			return false
		}
		src, _ := p.TopicSource(t)
		return source == "" || src == source
	})
}

// allSources returns every alias along topic's chain of sources, stopping
// at a topic with no source or at an alias already seen.
func allSources(p policy.Policy, topic string, into map[string]bool) {
	seen := make(map[string]bool)
	for {
		src, ok := p.TopicSource(topic)
		if !ok || seen[src] {
			return
		}
		seen[src] = true
		into[src] = true
		if topic, ok = p.UpstreamTopic(topic); !ok {
			return
		}
	}
}

func upstreamClusters(p policy.Policy, topics []string) []string {
	set := make(map[string]bool)
	for _, t := range heartbeatTopics(p, topics) {
		allSources(p, t, set)
	}
	out := make([]string, 0, len(set))
	for a := range set {
		out = append(out, a)
	}
	slices.Sort(out)
	return out
}

// countHops returns at which level of topic's chain of sources alias
// appears (1 for the direct source), or -1 if it does not or the chain
// loops before it.
func countHops(p policy.Policy, topic, alias string) int {
	seen := make(map[string]bool)
	for hops := 1; ; hops++ {
		src, ok := p.TopicSource(topic)
		switch {
		case !ok:
			return -1
		case src == alias:
			return hops
		case seen[src]:
			return -1
		}
		seen[src] = true
		if topic, ok = p.UpstreamTopic(topic); !ok {
			return -1
		}
	}
}

// replicationHops is the smallest hop count over the heartbeats topics, or
// -1.
func replicationHops(p policy.Policy, topics []string, alias string) int {
	best := -1
	for _, t := range heartbeatTopics(p, topics) {
		if h := countHops(p, t, alias); h != -1 && (best == -1 || h < best) {
			best = h
		}
	}
	return best
}

func filterSorted(topics []string, keep func(string) bool) []string {
	out := []string{}
	for _, t := range topics {
		if keep(t) {
			out = append(out, t)
		}
	}
	slices.Sort(out)
	return out
}
