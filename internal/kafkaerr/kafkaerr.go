// Package kafkaerr sorts errors from Kafka brokers and clients into the
// classes kmirror acts on: retry or stop a produce, a topic the cluster no
// longer knows, an error that passes by itself.
package kafkaerr

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Class is what a produce error means for the partition.
type Class uint8

// Classes of produce errors.
const (
	// Retry: sending again may succeed.
	Retry Class = iota
	// TooLarge: the target refused the batch as too large; the engine
	// sends its records one at a time to stop exactly at a large one.
	TooLarge
	// Fatal: retrying cannot cure it; the partition stops, loudly,
	// instead of skipping the record.
	Fatal
)

// fatalErrs are the produce errors of class Fatal.
var fatalErrs = []error{
	kerr.InvalidRecord, kerr.CorruptMessage, kerr.InvalidTimestamp, kerr.TopicAuthorizationFailed,
	kerr.ClusterAuthorizationFailed, kerr.PolicyViolation, kerr.UnsupportedForMessageFormat,
	kerr.UnsupportedCompressionType, kerr.TransactionalIDAuthorizationFailed,
}

// Classify returns the class of a produce error; nil is Retry.
func Classify(err error) Class {
	switch {
	case err == nil:
		return Retry
	case errors.Is(err, kerr.MessageTooLarge), errors.Is(err, kerr.RecordListTooLarge):
		return TooLarge
	case IsAny(err, fatalErrs):
		return Fatal
	}
	return Retry
}

// IsAny reports whether err is one of errs.
func IsAny(err error, errs []error) bool {
	for _, e := range errs {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// goneErrs mean the cluster does not know the topic: deleted (and maybe
// created again, with a new topic ID).
var goneErrs = []error{kerr.UnknownTopicOrPartition, kerr.UnknownTopicID}

// TopicGone reports whether err, from writing to a topic, means the
// cluster does not know the topic any more: deleted, or deleted and
// created again (a kgo producer keeps the topic ID it first saw).
func TopicGone(err error) bool { return IsAny(err, goneErrs) }

// Transient reports whether err may pass by itself: a retriable Kafka
// error, or no answer at all (a broker that closed the connection or is
// down, a request that timed out). A cancelled context is not.
func Transient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Retriable
	}
	return true
}
