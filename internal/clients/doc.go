// Package clients builds franz-go client options from the Java client
// properties found in MirrorMaker 2 configs ("bootstrap.servers",
// "security.protocol", "ssl.*", "sasl.*" and the common tuning keys).
//
// Key and trust stores may be JKS (Java's default type), PKCS12 or PEM, with
// ssl.keystore.password, ssl.truststore.password and ssl.key.password as in
// Java; encrypted PEM keys must be PBES2 PKCS#8. The SASL mechanisms are
// PLAIN, SCRAM, GSSAPI (Kerberos, with Krb5LoginModule's key tab or ticket
// cache options) and OAUTHBEARER (the unsecured tokens of Kafka's default
// login handler), configured through sasl.jaas.config. Keys that have no franz-go equivalent, or that do
// not apply to the requested role, are ignored and reported by Unused.
//
// ProduceWait is a produce whose wait ends with its context, for writers
// that must not hold up a stop.
//
// Errors and String methods never include passwords, JAAS configs or key
// material.
package clients
