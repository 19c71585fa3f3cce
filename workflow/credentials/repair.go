package credentials

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/keyledger/keyledger/kube"
	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow"
)

// probeSkipped is the probe status of a server whose pod does not exist: a
// server that does not run holds no wrong password (it reads the Secret
// when it starts).
const probeSkipped ProbeStatus = "skipped"

// notProbed is the probe status of a server no probe record names yet.
const notProbed ProbeStatus = ""

// probeServer probes each server pod with the password its Secret holds.
// A pod that refuses is deleted once (UID precondition); the run waits,
// bounded, for its replacement (same name, new UID, Ready) and probes it
// again: still refused is a refusal (exit 2). An unknown answer never
// restarts a pod: the run ends uncertain (exit 75) and a rerun probes again.
//
// A server whose newest probe record in the journal says accepted, skipped
// or planned is done; one whose newest says refused (its pod deleted
// since) or unknown is probed again, by the next decision of this run (after
// another server's repair) or by a rerun. An unknown answer is never a
// reason to delete a pod; the run ends uncertain when the decision's last
// probe of a server is unknown.
func (f *family) probeServer(ctx context.Context, p *progress) (*workflow.Decision, error) {
	unknown := 0
	var notOwned []notOwnedPod
	for _, srv := range f.cmd.Spec.Servers {
		switch p.probes[srv.Pod].Status {
		case notProbed, ProbeRefused, ProbeUnknown: // not probed, or probed again
		default: // accepted, skipped, or any other answer that needs nothing
			continue
		}
		d, err := f.repairOne(ctx, srv, p)
		if err != nil || d != nil {
			return d, err
		}
		switch res := p.probes[srv.Pod]; {
		case res.Reason == ReasonServerNotOwned:
			notOwned = append(notOwned, notOwnedPod{Pod: srv.Pod, Check: p.notOwned[srv.Pod]})
		case res.Status == ProbeUnknown:
			unknown++
		}
	}
	if len(notOwned) > 0 {
		// A pod named like a server but not tied to its live controller got
		// nothing: whoever made it is not the server, and the run refuses
		// naming it (a rerun reads it again).
		return &workflow.Decision{Refuse: &workflow.Refusal{Reason: ReasonServerNotOwned,
			Summary: store.DetailOf(notOwnedSummary{Namespace: f.cmd.Spec.Namespace, NotOwned: notOwned})}}, nil
	}
	if unknown == 0 {
		return nil, nil
	}
	return end(&workflow.Uncertain{Reason: ReasonProbeUnknown,
		Err: errors.New("a server's answer to the credential probe was neither acceptance nor refusal; no pod was restarted")})
}

func (f *family) repairOne(ctx context.Context, srv Server, p *progress) (*workflow.Decision, error) {
	target := f.target(store.TargetPod, srv.Pod)
	deletedUID, deleteCalled := p.podDeletedUID[srv.Pod]
	pod, err := f.readPod(ctx, srv.Pod)
	if err != nil {
		return nil, err
	}
	if deleteCalled && (pod == nil || string(pod.UID) == deletedUID || !ready(pod)) {
		if pod, err = f.awaitReplacement(ctx, p, srv.Pod, deletedUID, target); err != nil {
			return nil, err
		}
		if pod == nil {
			return end(&workflow.Uncertain{Reason: ReasonReplacementNotReady})
		}
	}
	if pod == nil {
		p.note(store.Record{Kind: store.RecordProbe, Step: stepProbe, Target: target, Status: probeSkipped, Reason: "pod-absent",
			Detail: store.DetailOf(probeDetail{Protocol: srv.Protocol, Port: srv.Port})})
		return nil, nil
	}
	probe, err := f.probePod(ctx, srv, pod, target)
	if err != nil {
		return nil, err
	}
	if probe.declined != "" || probe.record.Status != ProbeRefused {
		p.note(probe.record)
		return nil, nil
	}
	return f.restartRefusing(ctx, p, srv, pod, probe, target, deleteCalled)
}

// readPod reads the named pod: nil when there is none.
func (f *family) readPod(ctx context.Context, name string) (*corev1.Pod, error) {
	pod, err := f.kube.GetPod(ctx, name)
	switch {
	case isNotFound(err):
		return nil, nil // client-go returns an empty object with the error
	case err != nil:
		return nil, kubeErr(err)
	}
	return pod, nil
}

// awaitReplacement waits for the replacement of the pod whose delete this
// run called (waitReplacement) and notes what the wait found
// (wait-replacement): the replacement, or nil when none was ready in time.
func (f *family) awaitReplacement(ctx context.Context, p *progress, name, deletedUID string, target store.Target) (*corev1.Pod, error) {
	pod, err := f.waitReplacement(ctx, name, deletedUID)
	switch {
	case err != nil:
		return nil, err
	case pod == nil:
		p.note(store.Record{Kind: store.RecordObservation, Step: "wait-replacement", Target: target,
			Status: statusNotReady, Reason: ReasonReplacementNotReady})
		return nil, nil
	}
	p.note(store.Record{Kind: store.RecordObservation, Step: "wait-replacement", Target: target, UID: string(pod.UID), Status: statusReady})
	return pod, nil
}

// probed is what one probe of a server pod showed.
type probed struct {
	record   store.Record // the probe record, to journal
	secretRV string       // the resourceVersion of the Secret the password came from
	declined string       // why the pod may not receive the password ("" when it was probed)
}

// probePod probes pod, srv's server, with the password its Secret holds.
// The password goes only where it belongs: a pod that may not receive it
// (probeable) is sent nothing, and its probe record says unknown and why.
// Otherwise the probe reaches the server: a dry run reaches nothing and
// records the probe as planned (workflow.Reach).
func (f *family) probePod(ctx context.Context, srv Server, pod *corev1.Pod, target store.Target) (probed, error) {
	detail := probeDetail{Protocol: srv.Protocol, Port: srv.Port}
	reason, check, err := f.probeable(ctx, srv, pod)
	if err != nil {
		return probed{}, err
	}
	if reason != "" {
		detail.NotOwned = check
		return probed{declined: reason, record: store.Record{Kind: store.RecordProbe, Step: stepProbe, Target: target, UID: string(pod.UID),
			Status: ProbeUnknown, Reason: store.Reason(reason), Detail: store.DetailOf(detail)}}, nil
	}
	var out probed
	out.record, err = workflow.Reach(ctx, store.Record{Kind: store.RecordProbe, Step: stepProbe, Target: target, UID: string(pod.UID),
		Detail: store.DetailOf(detail)}, func(ctx context.Context, probe store.Record) (store.Record, error) {
		res, rv, err := f.probeUntilReached(ctx, srv, pod)
		out.secretRV, probe.Status, probe.Reason = rv, res.Status, res.Reason
		return probe, err
	})
	return out, err
}

// restartRefusing decides about a server pod that refused the password its
// Secret holds (probe): its restart (delete-pod, once per cause), or a
// refusal saying why not: this run restarted it already
// (server-still-refuses), or restartDeclined's reason.
func (f *family) restartRefusing(ctx context.Context, p *progress, srv Server, pod *corev1.Pod, probe probed, target store.Target, deleteCalled bool) (*workflow.Decision, error) {
	authorship := p.authorshipOfSecret(srv.Secret)
	declined := func(reason string, s podSummary) (*workflow.Decision, error) {
		s.Namespace, s.Pod, s.Secret, s.Authorship = f.cmd.Spec.Namespace, srv.Pod, srv.Secret, authorship
		return &workflow.Decision{Notes: []store.Record{probe.record}, Refuse: &workflow.Refusal{Reason: reason, Summary: store.DetailOf(s)}}, nil
	}
	if deleteCalled {
		return declined(ReasonServerStillRefuses, podSummary{})
	}
	c := restartCause(srv, pod, probe.secretRV)
	why, by, err := f.restartDeclined(ctx, target, authorship, c, "")
	switch {
	case err != nil:
		return nil, err
	case why == ReasonSecretUnproven:
		return declined(why, podSummary{Detail: "the Secret is unproven (anyone who may create Secrets here may have written it); " +
			"a server is restarted onto it only with spec.repair.restartOnUnproven"})
	case why != "":
		return declined(why, podSummary{RestartedBy: by,
			Detail: "restarted once for this Secret version, controller revision and pod spec; restarted again only after one of them changes"})
	}
	p.note(probe.record)
	return &workflow.Decision{Call: f.deletePodCall(srv.Pod, pod.UID, srv.Secret, authorship, c)}, nil
}

// restartDeclined says why a refusing server, whose Secret has authorship
// and whose restart would answer cause c, is not restarted ("" when it
// is), and which run restarted it when that is why:
//
//   - secret-unproven: the Secret's authorship is unproven and the plan
//     does not opt in (spec.repair.restartOnUnproven): a restart would make
//     the server take a password anyone who may create Secrets may know;
//   - server-still-refuses: one restart per cause: a restart of this pod
//     that any run of the plan journaled for the same Secret version,
//     controller revision and pod spec (other than the run mine, whose
//     call is being asked again) is not repeated.
func (f *family) restartDeclined(ctx context.Context, target store.Target, authorship Authorship, c cause, mine string) (string, string, error) {
	if authorship == AuthorshipUnproven && !f.cmd.Spec.restartOnUnproven() {
		return ReasonSecretUnproven, "", nil
	}
	if f.journal == nil {
		return "", "", nil
	}
	// Any run but mine: the call being asked again is mine, and a record
	// of mine (forged or not) never hides an older restart for the cause.
	found, err := f.journal.FindInRuns(ctx, store.RunRecordParams{Namespace: f.cmd.Spec.Namespace, Command: f.cmd.Metadata.MutationID,
		Kind: store.RecordAuthorityCall, Step: stepDeletePod, Target: target.String(), Digest: c.digest(), Except: mine})
	switch {
	case err != nil:
		return "", "", &workflow.Unavailable{Dependency: "postgresql", Err: err}
	case found != nil:
		return ReasonServerStillRefuses, found.Run, nil
	}
	return "", "", nil
}

// probeable says why pod may not receive srv's password ("" when it may):
// unprobeable's reason, or server-not-owned with the check the pod failed
// (notOwned). It reads the pod's controller.
func (f *family) probeable(ctx context.Context, srv Server, pod *corev1.Pod) (reason, check string, err error) {
	if reason := f.unprobeable(srv, pod); reason != "" {
		return reason, "", nil
	}
	check, err = f.notOwned(ctx, srv, pod)
	if err != nil || check == "" {
		return "", "", err
	}
	return ReasonServerNotOwned, check, nil
}

// The checks that tie a server pod to its live StatefulSet (notOwned).
const (
	checkOwnerGroup       = "owner-group"
	checkControllerAbsent = "controller-absent"
	checkOwnerUID         = "owner-uid"
	checkSelector         = "selector"
	checkContainers       = "containers"
)

// notOwned says which check ties pod not to the live StatefulSet the plan
// expects ("" when every one holds, or when the plan expects no
// StatefulSet): its controller owner reference names the group apps and
// the live StatefulSet's UID (a name and kind anyone who may create pods
// can write; the UID any sibling pod shows), the StatefulSet's selector
// matches the pod's labels, and the pod's containers and init containers
// (name, image, command, args, env, envFrom) are the template's. Anyone
// who may create pods can name one like a server, with such an owner
// reference in a group of their own that the garbage collector never
// resolves, or with the real UID; only the StatefulSet's controller makes
// pods that pass all of it.
func (f *family) notOwned(ctx context.Context, srv Server, pod *corev1.Pod) (string, error) {
	want := srv.ExpectedController()
	if want.Kind != ControllerStatefulSet {
		return "", nil
	}
	owner := metav1.GetControllerOf(pod) // unprobeable checked its kind and name
	if gv, err := schema.ParseGroupVersion(owner.APIVersion); err != nil || gv.Group != kube.StatefulSets.Group {
		return checkOwnerGroup, nil
	}
	sts, err := f.kube.GetStatefulSet(ctx, want.Name)
	switch {
	case isNotFound(err):
		return checkControllerAbsent, nil
	case err != nil:
		return "", kubeErr(err)
	case sts.UID != owner.UID:
		return checkOwnerUID, nil
	}
	if sts.Spec.Selector == nil {
		return checkSelector, nil
	}
	sel, err := metav1.LabelSelectorAsSelector(sts.Spec.Selector)
	if err != nil || sel.Empty() || !sel.Matches(labels.Set(pod.Labels)) {
		return checkSelector, nil
	}
	tmpl := sts.Spec.Template.Spec
	if !sameContainers(pod.Spec.Containers, tmpl.Containers) || !sameContainers(pod.Spec.InitContainers, tmpl.InitContainers) {
		return checkContainers, nil
	}
	return "", nil
}

// sameContainers: a and b run the same programs: the same containers in
// the same order, each with the same name, image, command, args, env and
// envFrom (nil and empty alike).
func sameContainers(a, b []corev1.Container) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if x.Name != y.Name || x.Image != y.Image || x.RestartPolicy == nil != (y.RestartPolicy == nil) ||
			x.RestartPolicy != nil && *x.RestartPolicy != *y.RestartPolicy ||
			!equality.Semantic.DeepEqual([]any{x.Command, x.Args, x.Env, x.EnvFrom}, []any{y.Command, y.Args, y.Env, y.EnvFrom}) {
			return false
		}
	}
	return true
}

// unprobeable says why pod may not receive srv's password ("" when it
// may, as far as the pod alone tells; notOwned reads its controller):
// only a pod that is Running and Ready, not terminating, not on the
// host's network, whose IP is one of status.podIPs, and whose controller
// is the one the plan expects.
func (f *family) unprobeable(srv Server, pod *corev1.Pod) string {
	switch {
	case pod.DeletionTimestamp != nil:
		return "pod-terminating"
	case pod.Status.Phase != corev1.PodRunning:
		return "pod-not-running"
	case !ready(pod):
		return "pod-not-ready"
	case pod.Spec.HostNetwork:
		return "pod-host-network"
	case pod.Status.PodIP == "":
		return "no-pod-ip"
	case !slices.ContainsFunc(pod.Status.PodIPs, func(ip corev1.PodIP) bool { return ip.IP == pod.Status.PodIP }):
		return "pod-ip-not-listed"
	}
	want := srv.ExpectedController()
	owner := metav1.GetControllerOf(pod)
	switch {
	case want.Kind == ControllerNone && owner == nil:
	case want.Kind == ControllerNone, owner == nil, owner.Kind != want.Kind, owner.Name != want.Name:
		return "pod-controller-mismatch"
	}
	return ""
}

// cause is what a restart of a refusing server followed: the Secret's
// version the pod was probed with, the pod's controller and its revision,
// and a digest of the pod's containers. Its digest is the delete-pod call
// record's Digest: the same cause is never restarted twice (FindInRuns).
type cause struct {
	Secret, SecretResourceVersion string
	Controller, Revision          string
	Spec                          string
}

func restartCause(srv Server, pod *corev1.Pod, secretRV string) cause {
	c := cause{Secret: srv.Secret, SecretResourceVersion: secretRV}
	if owner := metav1.GetControllerOf(pod); owner != nil {
		c.Controller = owner.Kind + "/" + owner.Name + "/" + string(owner.UID)
	}
	for _, l := range []string{"controller-revision-hash", "pod-template-hash"} {
		if v, ok := pod.Labels[l]; ok {
			c.Revision = v
			break
		}
	}
	h := sha256.New()
	for _, ctr := range pod.Spec.Containers {
		b, _ := json.Marshal([]any{ctr.Name, ctr.Image, ctr.Command, ctr.Args, ctr.Env, ctr.EnvFrom})
		h.Write(b)
	}
	c.Spec = hex.EncodeToString(h.Sum(nil))[:16]
	return c
}

func (c cause) digest() string {
	b, _ := json.Marshal([]string{c.Secret, c.SecretResourceVersion, c.Controller, c.Revision, c.Spec})
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// probeUntilReached probes pod; while the server cannot be reached
// (ProbeResult.unreachable) it probes again, bounded by f.reprobe, each
// time only after reading the pod again: the password goes to the same
// pod (UID) at the same address, still probeable, or the last answer
// stands. Only the last answer is journaled: one probe record per probe
// of a server, as before.
func (f *family) probeUntilReached(ctx context.Context, srv Server, pod *corev1.Pod) (ProbeResult, string, error) {
	res, rv, err := f.probeOnce(ctx, srv, pod)
	if err != nil || !res.unreachable() {
		return res, rv, err
	}
	_, err = f.reprobe(ctx, func(ctx context.Context) (bool, error) {
		cur, err := f.kube.GetPod(ctx, srv.Pod)
		switch {
		case isNotFound(err):
			return true, nil
		case err != nil:
			return false, kubeErr(err)
		case cur.UID != pod.UID || cur.Status.PodIP != pod.Status.PodIP:
			return true, nil // another pod: the last answer stands
		}
		if reason, _, err := f.probeable(ctx, srv, cur); err != nil || reason != "" {
			return true, err // not to be probed: the last answer stands
		}
		again, againRV, err := f.probeOnce(ctx, srv, cur)
		if err != nil {
			return false, err
		}
		res, rv = again, againRV
		return !res.unreachable(), nil
	})
	if err != nil && ctx.Err() == nil {
		return ProbeResult{}, "", err
	}
	return res, rv, nil
}

// probeOnce reads the server's Secret and probes the pod's IP; it says
// which resourceVersion of the Secret the password came from.
func (f *family) probeOnce(ctx context.Context, srv Server, pod *corev1.Pod) (ProbeResult, string, error) {
	s, err := f.kube.GetSecret(ctx, srv.Secret)
	if err != nil {
		return ProbeResult{}, "", kubeErr(err)
	}
	var user []byte
	if srv.UserKey != "" {
		user = s.Data[srv.UserKey]
	}
	password, ok := s.Data[srv.PasswordKey]
	if !ok {
		return ProbeResult{Status: ProbeUnknown, Reason: "password-key-absent"}, s.ResourceVersion, nil
	}
	res := f.probe(ctx, srv.Protocol, podAddress(pod.Status.PodIP, srv.Port), user, password)
	for k := range s.Data {
		clear(s.Data[k])
	}
	return res, s.ResourceVersion, nil
}

// waitReplacement waits for the pod of this name with a UID other than
// deletedUID, Ready and with an IP. It returns nil when the bound passes.
func (f *family) waitReplacement(ctx context.Context, name, deletedUID string) (*corev1.Pod, error) {
	var found *corev1.Pod
	ok, err := f.wait(ctx, func(ctx context.Context) (bool, error) {
		pod, err := f.kube.GetPod(ctx, name)
		switch {
		case isNotFound(err):
			return false, nil
		case err != nil:
			return false, err
		case string(pod.UID) != deletedUID && ready(pod) && pod.Status.PodIP != "":
			found = pod
			return true, nil
		}
		return false, nil
	})
	if err != nil && ctx.Err() == nil {
		return nil, kubeErr(err)
	}
	if !ok {
		return nil, nil
	}
	return found, nil
}

func ready(pod *corev1.Pod) bool {
	if pod.DeletionTimestamp != nil || pod.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// authorshipOfSecret is the authorship this run journaled for the planned
// Secret name: unproven when nothing proves more.
func (p *progress) authorshipOfSecret(name string) Authorship {
	if a, ok := p.authorship[name]; ok {
		return a
	}
	return AuthorshipUnproven
}

// deletePodCall restarts a refusing server once, onto what its Secret
// holds; the call record names that Secret and its authorship, so the
// journal says whether the server was restarted onto a Secret keyledger
// created, adopted, or only kept as it found it.
func (f *family) deletePodCall(name string, uid types.UID, secret string, authorship Authorship, c cause) *workflow.Call {
	return &workflow.Call{
		Step: stepDeletePod, Verb: workflow.VerbDelete, Target: f.target(store.TargetPod, name), UID: string(uid), Digest: c.digest(),
		Detail: store.DetailOf(deletePodDetail{Why: "refused-credentials", Secret: secret, Authorship: authorship,
			Cause: causeDetail{SecretResourceVersion: c.SecretResourceVersion, Controller: c.Controller, Revision: c.Revision, Spec: c.Spec}}),
		Send: func(ctx context.Context) workflow.Answer {
			return deleteAnswer(uid, "deleted", f.kube.DeletePod(ctx, name, uid))
		},
	}
}

// causeOf is the cause a delete-pod call's detail names (its retry keeps
// the same digest).
func causeOf(d deletePodDetail) cause {
	return cause{Secret: d.Secret, SecretResourceVersion: d.Cause.SecretResourceVersion,
		Controller: d.Cause.Controller, Revision: d.Cause.Revision, Spec: d.Cause.Spec}
}

func (f *family) resolveDeletePod(ctx context.Context, name string, call store.Record) (workflow.Verdict, error) {
	pod, err := f.kube.GetPod(ctx, name)
	if v, settled := workflow.ResolveDelete(call, pod, err, workflow.DeleteVerdicts{
		Gone:        workflow.Verdict{Kind: workflow.Ours, Reason: reasonAbsent},
		Replaced:    workflow.Verdict{Kind: workflow.Ours, Reason: "replaced"},
		Terminating: workflow.Verdict{Kind: workflow.Ours, Reason: "terminating"},
	}); settled {
		return v, nil
	}
	d, err := detailOf[deletePodDetail](call)
	if err != nil {
		return workflow.Verdict{}, err
	}
	return workflow.Verdict{Kind: workflow.NotApplied, Reason: "still-running", UID: call.UID,
		Retry: f.deletePodCall(name, pod.UID, d.Secret, d.Authorship, causeOf(d))}, nil
}
