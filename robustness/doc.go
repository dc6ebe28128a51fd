// Package robustness runs kmirror through faults that come together and at
// bad moments, and checks every record afterwards (issue 22, after etcd's
// robustness suite and Kafka's MirrorMaker system tests).
//
// A run (Run, driven by TestRobustness and TestSoak) starts two 3-node
// clusters whose brokers kmirror reaches through TCP proxies of its own
// (bench/latproxy), one to three kmirror workers in group mode (with or
// without exactly-once, on passthrough or the record path), a traffic
// generator (traffic.go) and fault injectors drawn from the seed
// (faults.go). At the end the checker (check.go) reads both clusters with
// kcat and asserts that no source record is missing, counts duplicates
// (none allowed with exactly-once), checks checkpoints and synced group
// offsets against the copied data, every partition's state in /status and
// kmirror's own counters. The soak (soak.go) samples the workers' memory,
// goroutines, open files and metric series and reports their slopes.
//
// The seed printed at the start reproduces the run's choices: the set-up,
// the faults, their order, targets and durations (timings under load
// still vary). See docs/robustness.md.
package robustness
