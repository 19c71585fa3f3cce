package credentials

import (
	"context"
	"slices"

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
	name := call.Target.Name
	i := slices.IndexFunc(f.cmd.Spec.Servers, func(s Server) bool { return s.Pod == name })
	if i < 0 {
		return "the pod is not a server of the plan", nil, nil
	}
	srv := f.cmd.Spec.Servers[i]
	target := f.target(store.TargetPod, name)
	pod, err := f.kube.GetPod(ctx, name)
	switch {
	case isNotFound(err):
		return "the pod is gone", nil, nil
	case err != nil:
		return "", nil, kubeErr(err)
	case string(pod.UID) != call.UID:
		return "the pod is another incarnation than the one the call named", nil, nil
	}
	detail := probeDetail{Protocol: srv.Protocol, Port: srv.Port}
	reason, check, err := f.probeable(ctx, srv, pod)
	if err != nil {
		return "", nil, err
	}
	if reason != "" {
		detail.NotOwned = check
		probe := store.Record{Kind: store.RecordProbe, Step: stepProbe, Target: target, UID: string(pod.UID),
			Status: ProbeUnknown, Reason: store.Reason(reason), Detail: store.DetailOf(detail)}
		return "the pod may not be probed (" + reason + "), so nothing shows it refuses", []store.Record{probe}, nil
	}
	var secretRV string
	probe, err := workflow.Reach(ctx, store.Record{Kind: store.RecordProbe, Step: stepProbe, Target: target, UID: string(pod.UID),
		Detail: store.DetailOf(detail)}, func(ctx context.Context, probe store.Record) (store.Record, error) {
		res, rv, err := f.probeUntilReached(ctx, srv, pod)
		secretRV, probe.Status, probe.Reason = rv, res.Status, res.Reason
		return probe, err
	})
	if err != nil {
		return "", nil, err
	}
	notes := []store.Record{probe}
	switch probe.Status {
	case ProbeRefused:
	case probePlanned: // a dry run probes nothing (workflow.Reach): it shows the call
		return "", notes, nil
	default:
		return "the server does not refuse the password its Secret holds (" + string(probe.Status) + "/" + string(probe.Reason) + ")", notes, nil
	}
	c := restartCause(srv, pod, secretRV)
	if c.digest() != call.Digest {
		return "the server refuses for another cause than the one the call names", notes, nil
	}
	s, err := f.kube.GetSecret(ctx, srv.Secret)
	if err != nil {
		return "", nil, kubeErr(err)
	}
	p, err := fold(run)
	if err != nil {
		return "", nil, err
	}
	authorship, _, err := f.authorship(ctx, p, s, newRunFinds(f.journal))
	if err != nil {
		return "", nil, &workflow.Unavailable{Dependency: "postgresql", Err: err}
	}
	why, by, err := f.restartDeclined(ctx, target, authorship, c, run.Op.MutationID)
	switch {
	case err != nil:
		return "", nil, err
	case why == ReasonSecretUnproven:
		return "the Secret is unproven and the plan does not opt in to restarts onto it", notes, nil
	case why != "":
		return "run " + by + " restarted the pod for this cause", notes, nil
	}
	return "", notes, nil
}
