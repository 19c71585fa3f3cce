package store

// State is where an operation stands in the journal. The same values exist as
// the PostgreSQL enum keyledger.operation_state, and the moves between them
// are defined by Events (machine.go), and repeated in keyledger.state_edges.
type State string

const (
	// StatePrepared: the preparation is committed; nothing has been sent to the authority.
	StatePrepared State = "prepared"
	// StateCalling: an authority call is recorded and may have been sent; its answer is not recorded.
	StateCalling State = "calling"
	// StateAnswered: the last call was applied as intended and recorded; more calls may follow.
	StateAnswered State = "answered"
	// StateResolving: the last call's outcome is unknown (lost, 409, 5xx); durable facts are being re-read.
	StateResolving State = "resolving"
	// StateCompleted: terminal; the operation's effect is confirmed in the authority.
	StateCompleted State = "completed"
	// StateRefused: terminal; the engine failed closed and sends nothing further.
	StateRefused State = "refused"
)

// States lists every state in the order an operation usually meets them.
func States() []State {
	return []State{StatePrepared, StateCalling, StateAnswered, StateResolving, StateCompleted, StateRefused}
}

// Terminal reports whether no further move is possible from s.
func (s State) Terminal() bool { return s == StateCompleted || s == StateRefused }

// RecordKind names what a journal record says. The same values exist as the
// PostgreSQL enum keyledger.record_kind; workflow step names use the same words.
type RecordKind string

const (
	// RecordPreparation: the command was accepted; its digest and target.
	RecordPreparation RecordKind = "preparation"
	// RecordObservation: what a read of the authority showed before deciding.
	RecordObservation RecordKind = "observation"
	// RecordAuthorityCall: a call about to be sent (attempt, preconditions, intended digest), committed before sending.
	RecordAuthorityCall RecordKind = "authority_call"
	// RecordAuthorityResult: what came back for the last call, or that it was lost.
	RecordAuthorityResult RecordKind = "authority_result"
	// RecordResolution: what re-reading the durable facts showed after an unknown outcome.
	RecordResolution RecordKind = "resolution"
	// RecordProbe: what a server answered to a credential probe.
	RecordProbe RecordKind = "probe"
	// RecordCompletion: the operation ended with its effect confirmed.
	RecordCompletion RecordKind = "completion"
	// RecordRefusal: the operation ended with a fail-closed decision.
	RecordRefusal RecordKind = "refusal"
)

// RecordKinds lists every record kind.
func RecordKinds() []RecordKind {
	return []RecordKind{RecordPreparation, RecordObservation, RecordAuthorityCall, RecordAuthorityResult,
		RecordResolution, RecordProbe, RecordCompletion, RecordRefusal}
}

// Status is a record's status word: what its answer, resolution,
// observation, probe or ending said (the journal's status column, free
// kebab-case text). The engine and each family declare the words they
// write and read as Status constants (workflow.Applied, workflow.Ours,
// ...), so a record's status is compared with a constant of this type,
// never with a string.
type Status string

// Reason is a record's reason word: why its answer, resolution,
// observation, probe or ending came out as it did (the journal's reason
// column, kebab-case). An operation's reason (Operation.Reason, a
// refusal's) is the same word journaled on the operation, and stays a
// string there.
type Reason string
