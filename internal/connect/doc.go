// Package connect serves a Kafka Connect-compatible REST API for MM2's
// connectors: MirrorSourceConnector and MirrorHeartbeatConnector configs,
// as MM2 users write them for a Connect cluster, become kmirror flows run by
// internal/runner. Connector configs and target states live in a Connect
// config topic on the worker's Kafka cluster, in the records Connect's
// KafkaConfigBackingStore writes; every kmirror worker reads that topic to
// its end and follows it, so all workers run the same connectors.
package connect
