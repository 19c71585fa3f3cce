package credentials

import (
	"context"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow"
)

// probePlanned is the status workflow.Reach gives a probe in a dry run.
const probePlanned ProbeStatus = "planned"

// ReasonReplayRunEnded: the journal handed a credential plan's run that
// had already ended (an operation journaled out of the run series, such as
// one under the command's own mutation ID after its runs, makes
// store.PrepareRun find an ended run instead of numbering the next one).
// A run of desired state is never replayed: the run refuses instead of
// reporting existing, and `keyledger journal show` names the operation.
const ReasonReplayRunEnded = "replay-run-ended"

// ConfirmReplay implements workflow.Family. A plan is desired state
// (workflow.Plan.Runs): after a terminal run the next run starts and reads
// the cluster afresh, so the engine never asks to replay one, and a forged
// completed run cannot stop the next run from converging. Should the
// journal still hand back an ended run, nothing of it is believed: the run
// refuses (replay-run-ended), with no read and no write.
func (f *family) ConfirmReplay(context.Context, *workflow.Run) (*workflow.Contradiction, error) {
	return &workflow.Contradiction{Reason: ReasonReplayRunEnded,
		Detail: "a credential plan's run is never replayed, but the journal returned a run that already ended"}, nil
}

// Asks implements workflow.Asker: whether a call the journal holds, found
// not applied by its resolution, is one this plan's decision would make
// now. Creates, patches, orphan deletes and generator deletes are built
// again by their resolution from a read made now, with the checks the
// decision makes (a create only of an absent planned Secret, a patch only
// of what the read lacks, an orphan only of a generator-backed
// ExternalSecret of a planned name, a delete only of a listed generator
// read now): the decision would make them. A server's restart follows a
// probe, which only a probe made now can stand for: a delete-pod call is
// sent again only when the pod is the one the call named (same UID), may
// receive the password (probeable: tied to its live StatefulSet), refuses
// the password its Secret holds now, for the same cause the call names,
// onto a Secret whose authorship, read now, allows a restart, and no other
// run restarted it for that cause (restartDeclined). A journaled call is
// evidence of a decision once made, never an instruction to repeat it.
func (f *family) Asks(ctx context.Context, run *workflow.Run, call *workflow.Call) (string, []store.Record, error) {
	if call.Step != stepDeletePod {
		return "", nil, nil
	}
	srv, pod, why, err := f.askedPod(ctx, call)
	if why != "" || err != nil {
		return why, nil, err
	}
	target := f.target(store.TargetPod, srv.Pod)
	probe, err := f.probePod(ctx, srv, pod, target)
	if err != nil {
		return "", nil, err
	}
	notes := []store.Record{probe.record}
	if probe.declined != "" {
		return "the pod may not be probed (" + probe.declined + "), so nothing shows it refuses", notes, nil
	}
	switch probe.record.Status {
	case ProbeRefused:
	case probePlanned: // a dry run probes nothing (workflow.Reach): it shows the call
		return "", notes, nil
	default:
		return "the server does not refuse the password its Secret holds (" + string(probe.record.Status) + "/" + string(probe.record.Reason) + ")", notes, nil
	}
	c := restartCause(srv, pod, probe.secretRV)
	if c.digest() != call.Digest {
		return "the server refuses for another cause than the one the call names", notes, nil
	}
	why, err = f.askRestart(ctx, run, srv, target, c)
	if err != nil {
		return "", nil, err
	}
	return why, notes, nil
}

// askedPod is the server whose pod call names, and that pod as it is now;
// or why the call is not asked: the pod is no server of the plan, is gone,
// or is another incarnation than the one the call named.
func (f *family) askedPod(ctx context.Context, call *workflow.Call) (Server, *corev1.Pod, string, error) {
	name := call.Target.Name
	i := slices.IndexFunc(f.cmd.Spec.Servers, func(s Server) bool { return s.Pod == name })
	if i < 0 {
		return Server{}, nil, "the pod is not a server of the plan", nil
	}
	pod, err := f.readPod(ctx, name)
	switch {
	case err != nil:
		return Server{}, nil, "", err
	case pod == nil:
		return Server{}, nil, "the pod is gone", nil
	case string(pod.UID) != call.UID:
		return Server{}, nil, "the pod is another incarnation than the one the call named", nil
	}
	return f.cmd.Spec.Servers[i], pod, "", nil
}

// askRestart says why a restart of srv's pod for cause c would not be
// made now ("" when it would): the authorship of srv's Secret, read now,
// does not allow it, or another run restarted the pod for that cause
// (restartDeclined).
func (f *family) askRestart(ctx context.Context, run *workflow.Run, srv Server, target store.Target, c cause) (string, error) {
	s, err := f.kube.GetSecret(ctx, srv.Secret)
	if err != nil {
		return "", kubeErr(err)
	}
	p, err := fold(run)
	if err != nil {
		return "", err
	}
	authorship, _, err := f.authorship(ctx, p, s, newRunFinds(f.journal))
	if err != nil {
		return "", &workflow.Unavailable{Dependency: "postgresql", Err: err}
	}
	why, by, err := f.restartDeclined(ctx, target, authorship, c, run.Op.MutationID)
	switch {
	case err != nil:
		return "", err
	case why == ReasonSecretUnproven:
		return "the Secret is unproven and the plan does not opt in to restarts onto it", nil
	case why != "":
		return "run " + by + " restarted the pod for this cause", nil
	}
	return "", nil
}
