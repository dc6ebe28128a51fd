// Package wire encodes and decodes the records MirrorMaker 2 keeps in its
// internal topics, byte-compatible with the Java implementation.
//
// Binary records (heartbeats, checkpoints, offset syncs) use Kafka's Struct
// layout: big-endian integers and strings prefixed with an INT16 byte length.
// Heartbeat and checkpoint values start with an INT16 version header; offset
// sync values have none. Decoders follow the Java reader: a negative string
// length or a field running past the end is an error, trailing bytes are
// ignored, and every version is read with the version 0 layout.
//
// The Connect bookkeeping (offsets topic keys and values) is compact JSON
// written with the field order and string escaping Java MM2 produces, so
// records written here compact together with records written by Java.
package wire
