// Package workflow is keyledger's engine: one looplab/fsm state machine per
// operation, whose every transition is committed to the journal (package
// store) before the engine acts on it.
//
// A family (key retirement, create-once credentials, versioned writes)
// supplies two things: Decide, which reads the durable facts and says what to
// do next (complete, refuse, or send one authority call), and Resolve, which
// re-reads the durable facts after a call whose outcome is unknown and
// classifies them as ours, not applied, or someone else's. The engine never
// re-sends a call whose outcome it does not know: an operation found in
// "calling" without a result goes to resolution. See README.md for the state
// diagram.
package workflow
