// Package checkpoint is kmirror's MirrorCheckpointConnector: it translates
// the committed offsets of the source cluster's consumer groups into
// offsets of the target, publishes them as MM2 checkpoints in
// <source>.checkpoints.internal on the target, and, when
// sync.group.offsets.enabled is set, commits them into idle groups of the
// target.
//
// Translation reads the flow's offset syncs (and, in exact mode, kmirror's
// offset index topic) into a Store; see docs/offset-translation.md for the
// two translation modes and their bounds on re-delivered records.
package checkpoint
