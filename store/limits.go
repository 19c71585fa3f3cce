package store

// MaxCallAttempt is the highest attempt number an authority_call record may
// carry (records CHECK attempt BETWEEN 1 AND 1000, migration 1). The engine
// refuses an operation before its next call would exceed it
// (attempt-limit), so the database check never fires.
const MaxCallAttempt = 1000
