// Package connect serves a Kafka Connect-compatible REST API for MM2's
// connectors: MirrorSourceConnector, MirrorCheckpointConnector and
// MirrorHeartbeatConnector configs, as MM2 users write them for a Connect
// cluster, become kmirror flows run by internal/runner. Connector configs,
// target states and restart requests live in a Connect config topic on the
// worker's Kafka cluster, in the records Connect's KafkaConfigBackingStore
// writes; every kmirror worker reads that topic to its end and follows it,
// so all workers run the same connectors. The workers meet in a Kafka group
// (Cluster) whose leader lists them all: task i of every connector is
// worker i's share, each worker writes its share's state to Connect's
// status topic (StatusStore, KafkaStatusBackingStore's records), and the
// API answers for the whole cluster, forwarding creates to the leader and
// restarts to the worker that runs the task.
package connect
