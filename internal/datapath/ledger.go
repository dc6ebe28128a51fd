package datapath

// Ledger is the progress of one partition: every source offset <= Done
// is acknowledged or skipped. The engine's lock guards it.
type Ledger struct {
	Done  int64 // -1: none
	Reset bool  // the source log restarted: Done is saved even when it is -1
}

// NewLedger returns the ledger of a partition with no progress.
func NewLedger() Ledger { return Ledger{Done: -1} }

// Skip marks source offsets up to off as handled.
func (l *Ledger) Skip(off int64) {
	if off > l.Done {
		l.Done = off
	}
}

// Position returns what to save for the partition, and whether anything.
func (l *Ledger) Position() (int64, bool) {
	return l.Done, l.Done >= 0 || l.Reset
}

// Restart makes progress follow a source log that restarted below it, at
// offset from.
func (l *Ledger) Restart(from int64) {
	l.Done, l.Reset = from-1, true
}
