package workflowtest

import "github.com/keyledger/keyledger/store"

// Count is the number of records of kind.
func Count(records []store.Record, kind store.RecordKind) int {
	n := 0
	for _, r := range records {
		if r.Kind == kind {
			n++
		}
	}
	return n
}
