package retire

import (
	"context"
	"errors"

	"github.com/keyledger/keyledger/kube"
	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow"
)

// Reasons a replay of a completed retirement is refused: the keyring
// Secret, read in this run, does not show what the journal says.
const (
	// ReasonReplaySecretAbsent: the keyring Secret is gone.
	ReasonReplaySecretAbsent = "replay-secret-absent"
	// ReasonReplayUIDChanged: the Secret has another UID than the one the
	// operation journaled (the command's expectedUID, the call's
	// precondition, the answer's).
	ReasonReplayUIDChanged = "replay-uid-changed"
	// ReasonReplayReceiptMissing: the keyring holds no receipt for the key.
	ReasonReplayReceiptMissing = "replay-receipt-missing"
	// ReasonReplayReceiptConflict: the keyring's receipt for the key is
	// not this operation's (another mutationId, requestId, retirementId or
	// material digest).
	ReasonReplayReceiptConflict = "replay-receipt-conflict"
)

// ConfirmReplay implements workflow.Family: a completed retirement is a
// replay only when the keyring Secret, read now with the one get the
// family holds, has this operation's UID, and its keyring holds this
// operation's exact receipt for the key with the key gone (ours). Any
// keyring refusal (not managed, terminating, catalog drifted, ...) is the
// contradiction replay-<reason>. It only reads.
func (f *family) ConfirmReplay(ctx context.Context, run *workflow.Run) (*workflow.Contradiction, error) {
	s, err := f.secret.Get(ctx)
	if err != nil {
		if errors.Is(err, kube.ReasonNotFound) {
			return &workflow.Contradiction{Reason: ReasonReplaySecretAbsent,
				Detail: "the keyring Secret does not exist; the journal says this operation retired a key from it"}, nil
		}
		return nil, &workflow.Unavailable{Dependency: "kubernetes", Err: err}
	}
	for _, uid := range journaledUIDs(run) {
		if string(s.UID) != uid {
			return &workflow.Contradiction{Reason: ReasonReplayUIDChanged,
				Detail: "the keyring Secret has UID " + string(s.UID) + ", the journal's is " + uid}, nil
		}
	}
	m, err := decodeKeyring(s, f.cmd.Spec)
	if err != nil {
		return &workflow.Contradiction{Reason: workflow.ReplayPrefix + reasonOf(err),
			Detail: "the keyring Secret cannot be read as this operation's keyring (" + reasonOf(err) + ")"}, nil
	}
	r, ok := m.Receipt(f.cmd.Spec.KeyID)
	switch {
	case !ok:
		return &workflow.Contradiction{Reason: ReasonReplayReceiptMissing,
			Detail: "the keyring holds no retirement receipt for key " + f.cmd.Spec.KeyID + "; the journal says this operation retired it"}, nil
	case !f.ours(r, m):
		return &workflow.Contradiction{Reason: ReasonReplayReceiptConflict,
			Detail: "the keyring's receipt for key " + f.cmd.Spec.KeyID + " is not this operation's (mutationId " + r.MutationID + ")"}, nil
	}
	return nil, nil
}

// journaledUIDs are the keyring Secret UIDs the operation journaled: the
// command's expectedUID (the preparation), and the UIDs of its
// replace-keyring calls and their answers and resolutions.
func journaledUIDs(run *workflow.Run) []string {
	var out []string
	if run.Op.ExpectedUID != "" {
		out = append(out, run.Op.ExpectedUID)
	}
	for _, r := range run.Records {
		if r.Step != stepReplace || r.UID == "" {
			continue
		}
		switch r.Kind {
		case store.RecordAuthorityCall, store.RecordAuthorityResult, store.RecordResolution:
			out = append(out, r.UID)
		}
	}
	return out
}
