// Package mirrorclient inspects a Kafka cluster that is the target of
// MirrorMaker 2 (or kmirror) replication, the way Java's MirrorClient and
// RemoteClusterUtils do.
//
// It answers two kinds of questions:
//
//   - Topology, from topic names alone: which clusters replicate into this
//     one (UpstreamClusters), how many hops away a cluster is
//     (ReplicationHops), which topics are copies of remote topics
//     (RemoteTopics, RemoteTopicsFrom), and where the heartbeats and
//     checkpoints topics are (HeartbeatTopics, CheckpointTopics). Upstream
//     clusters are found through replicated heartbeats topics such as
//     "A.heartbeats" (one hop from A) or "B.A.heartbeats" (two hops).
//   - Failover, from the checkpoints MM2 writes to
//     "<remote>.checkpoints.internal": the offsets a consumer group committed
//     on a remote cluster, translated to this cluster's topics and offsets
//     (RemoteConsumerOffsets, RemoteCheckpoints, TranslateOffsets). A
//     consumer moving from cluster A to cluster B asks B for the offsets of
//     its group with the remote alias A, and commits them on B.
//
// Topic names are interpreted by a replication policy that must match the
// one the replication uses: MM2's DefaultReplicationPolicy ("A.topic") with
// an optional custom separator, or IdentityReplicationPolicy (topics keep
// their names). Records are read in MM2's binary formats, so the package
// works the same against clusters replicated by Java MM2 or by kmirror.
package mirrorclient
