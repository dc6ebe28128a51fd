// Package clients builds franz-go client options from the Java client
// properties found in MirrorMaker 2 configs ("bootstrap.servers",
// "security.protocol", "ssl.*", "sasl.*" and the common tuning keys).
//
// Only PEM key material is supported (Go's standard library reads neither
// JKS nor PKCS12), and only the PLAIN and SCRAM SASL mechanisms, configured
// through sasl.jaas.config. Keys that have no franz-go equivalent, or that do
// not apply to the requested role, are ignored and reported by Unused.
//
// Errors and String methods never include passwords, JAAS configs or key
// material.
package clients
