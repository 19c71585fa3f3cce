package credentials

import (
	"context"
	"errors"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow"
)

// readConcurrency bounds the reads of one kind (ExternalSecrets, Secrets)
// in flight at once.
const readConcurrency = 32

// readExternalSecrets reads the ExternalSecret of every planned Secret's name
// (concurrently), listed in adopt or not, before anything is written.
// Absent: nothing to adopt. Generator-backed and writing the Secret of its
// own name: adopted (orphaned, then waited for). Anything else (its data comes from a remote
// store, or it writes another Secret) is not ours to replace: refuse.
func (f *family) readExternalSecrets(ctx context.Context, p *progress) (*workflow.Decision, error) {
	if p.adoptChecked {
		return nil, nil
	}
	absent := 0
	names := f.cmd.Spec.SecretNames()
	// The planned Secrets createSecret will read are read in the same
	// round (one round of reads instead of two); in a fresh run that round
	// was started while the journal was opened (prefetch). The Secret
	// reads are used only when no ExternalSecret is found: then nothing is
	// orphaned, waited for or written between them and that decision
	// (progress.early).
	_, secrets := p.unsettled(f.cmd.Spec)
	var reads []externalRead
	var early []secretRead
	if pf := f.takePrefetched(); pf != nil {
		// Waited for even when it is not decided from (a resumed run):
		// none of its reads is still in flight when the run reads again,
		// or when the process ends.
		<-pf.done
		if p.freshRun() {
			reads, early = pf.external, pf.secrets
		}
	}
	if len(reads) != len(names) || len(early) != len(secrets) {
		reads, early = f.readRound(ctx, names, secrets)
	}
	// Decided in plan order: the first that may not be adopted refuses.
	for i, name := range names {
		es, err := reads[i].es, reads[i].err
		if isNotFound(err) {
			absent++
			continue
		}
		if err != nil {
			return nil, kubeErr(err)
		}
		obs := externalObservation(es)
		if reason := f.invalidExternal(es); reason != "" {
			return f.refuseExternal(reason, name, obs), nil
		}
		p.note(obs) // found: adopted
	}
	if len(p.found) == 0 && len(p.orphanUID) == 0 && len(p.externalDeleted) == 0 {
		p.early = early
	}
	p.note(store.Record{Kind: store.RecordObservation, Step: stepReadExternalSecrets, Status: statusChecked,
		Detail: store.DetailOf(externalSecretsDetail{Read: len(f.cmd.Spec.Secrets), Absent: absent})})
	return nil, nil
}

// externalRead is one ExternalSecret read (GET by name), or its error.
type externalRead struct {
	es  *unstructured.Unstructured
	err error
}

// readRound reads the ExternalSecrets named external and the planned
// Secrets named secrets side by side, each kind under its own
// readConcurrency bound on what is decoded at once, and returns the reads
// in the order of the names.
func (f *family) readRound(ctx context.Context, external, secrets []string) ([]externalRead, []secretRead) {
	reads := make([]externalRead, len(external))
	var wg sync.WaitGroup
	wg.Go(func() {
		workflow.Each(len(external), readConcurrency, func(i int) {
			reads[i].es, reads[i].err = f.kube.GetExternalSecret(ctx, external[i])
		})
	})
	early := f.readSecrets(ctx, secrets)
	wg.Wait()
	return reads, early
}

// prefetched is the first decision's round of reads (readRound over every
// planned name), started by prefetch; done is closed once it is made.
type prefetched struct {
	done     chan struct{}
	external []externalRead
	secrets  []secretRead
}

// prefetch is the plan's workflow.Plan.Prefetch: once the permission matrix
// held, it starts the round of reads the first decision of a fresh run
// makes (every planned Secret and its ExternalSecret), which travels while
// the journal connects and the run is prepared. Only the first decision of
// a fresh run decides from it (takePrefetched, progress.freshRun); any
// other decision reads again.
func (f *family) prefetch(ctx context.Context) {
	names := f.cmd.Spec.SecretNames()
	pf := &prefetched{done: make(chan struct{})}
	f.prefetched = pf
	go func() {
		defer close(pf.done)
		pf.external, pf.secrets = f.readRound(ctx, names, names)
	}()
}

// takePrefetched hands out the prefetched round once.
func (f *family) takePrefetched() *prefetched {
	pf := f.prefetched
	f.prefetched = nil
	return pf
}

// freshRun: the run holds nothing but its preparation (PrepareRun created
// it for this process): nothing was read, decided or written in it yet.
func (p *progress) freshRun() bool {
	return len(p.records) == 1 && p.records[0].Kind == store.RecordPreparation
}

// invalidExternal is the reason an ExternalSecret may not be adopted, or "".
func (f *family) invalidExternal(es *unstructured.Unstructured) string {
	switch {
	case !generatorBacked(es):
		return ReasonNotGeneratorBacked
	case targetName(es) != es.GetName():
		return ReasonTargetMismatch
	}
	return ""
}

func (f *family) refuseExternal(reason, name string, records ...store.Record) *workflow.Decision {
	return &workflow.Decision{Notes: records, Refuse: &workflow.Refusal{Reason: reason, Summary: f.externalSummary(name)}}
}

// externalSummary names the ExternalSecret name in a refusal.
func (f *family) externalSummary(name string) store.Detail {
	return store.DetailOf(externalSummary{Namespace: f.cmd.Spec.Namespace, ExternalSecret: name, ListedInAdopt: f.listed(name)})
}

// externalObservation records a read of an ExternalSecret: identity,
// version, and what was checked (never its spec).
func externalObservation(es *unstructured.Unstructured) store.Record {
	return store.Record{Kind: store.RecordObservation, Step: stepReadExternalSecret, Target: store.Target{Kind: store.TargetExternalSecret, Namespace: es.GetNamespace(), Name: es.GetName()},
		UID: string(es.GetUID()), ResourceVersion: es.GetResourceVersion(), Status: statusPresent,
		Detail: store.DetailOf(externalSecretDetail{GeneratorBacked: generatorBacked(es), TargetName: targetName(es) == es.GetName(),
			Terminating: es.GetDeletionTimestamp() != nil})}
}

// generatorBacked: every spec.dataFrom entry has sourceRef.generatorRef and
// there are no spec.data entries (those name remote keys).
func generatorBacked(es *unstructured.Unstructured) bool {
	data, _, _ := unstructured.NestedSlice(es.Object, "spec", "data")
	from, _, _ := unstructured.NestedSlice(es.Object, "spec", "dataFrom")
	if len(data) > 0 || len(from) == 0 {
		return false
	}
	for _, item := range from {
		m, ok := item.(map[string]any)
		if !ok {
			return false
		}
		if _, ok, _ := unstructured.NestedMap(m, "sourceRef", "generatorRef"); !ok {
			return false
		}
		for _, remote := range []string{"extract", "find"} {
			if _, ok := m[remote]; ok {
				return false
			}
		}
	}
	return true
}

// targetName is the Secret an ExternalSecret writes: spec.target.name, or
// its own name.
func targetName(es *unstructured.Unstructured) string {
	if name, ok, _ := unstructured.NestedString(es.Object, "spec", "target", "name"); ok && name != "" {
		return name
	}
	return es.GetName()
}

// orphanExternalSecret deletes, one at a time, each ExternalSecret found
// by readExternalSecrets (or orphaned by an earlier process of this run) with
// propagationPolicy Orphan, so its Secret stays, and waits until the garbage
// collector has released the Secret and removed the ExternalSecret.
// Right before each delete it reads the ExternalSecret again and checks it
// again (an ExternalSecret switched to a remote store while the run waited
// for another one stops the run before its delete); the delete carries that
// read's UID and resourceVersion as preconditions.
func (f *family) orphanExternalSecret(ctx context.Context, p *progress) (*workflow.Decision, error) {
	for _, name := range f.cmd.Spec.SecretNames() {
		if p.externalGone[name] || !p.found[name] && !p.externalDeleted[name] {
			continue
		}
		uid := p.orphanUID[name]
		if !p.externalDeleted[name] {
			es, err := f.kube.GetExternalSecret(ctx, name)
			switch {
			case isNotFound(err):
				p.note(store.Record{Kind: store.RecordObservation, Step: stepReadExternalSecret, Target: f.target(store.TargetExternalSecret, name), Status: statusAbsent})
				continue
			case err != nil:
				return nil, kubeErr(err)
			}
			obs := externalObservation(es)
			if reason := f.invalidExternal(es); reason != "" {
				return f.refuseExternal(reason, name, obs), nil
			}
			if es.GetDeletionTimestamp() == nil {
				return &workflow.Decision{Notes: []store.Record{obs}, Call: f.orphanCall(name, es.GetUID(), es.GetResourceVersion())}, nil
			}
			// Already being deleted (by someone else): wait for it.
			p.note(obs)
			uid = string(es.GetUID())
		}
		gone, err := f.wait(ctx, func(ctx context.Context) (bool, error) {
			cur, err := f.kube.GetExternalSecret(ctx, name)
			switch {
			case isNotFound(err):
				return true, nil
			case err != nil:
				return false, err
			case string(cur.GetUID()) != uid:
				return false, errReplaced
			}
			return false, nil
		})
		if errors.Is(err, errReplaced) {
			return f.refuseExternal(ReasonExternalReplaced, name), nil
		}
		if err != nil && ctx.Err() == nil {
			return nil, kubeErr(err)
		}
		if !gone {
			return end(&workflow.Uncertain{Reason: ReasonExternalNotGone})
		}
		p.note(store.Record{Kind: store.RecordObservation, Step: stepWaitExternalGone, Target: f.target(store.TargetExternalSecret, name),
			UID: uid, Status: statusGone})
	}
	return nil, nil
}

type replacedError struct{}

func (replacedError) Error() string { return "replaced by another object of the same name" }

var errReplaced error = replacedError{}

func (f *family) orphanCall(name string, uid types.UID, resourceVersion string) *workflow.Call {
	return &workflow.Call{
		Step: stepOrphanExternalSecret, Verb: workflow.VerbDelete, Target: f.target(store.TargetExternalSecret, name), UID: string(uid), ResourceVersion: resourceVersion,
		Detail: store.DetailOf(orphanDetail{PropagationPolicy: "Orphan", ListedInAdopt: f.listed(name)}),
		Send: func(ctx context.Context) workflow.Answer {
			// A failed precondition (409) is settled by re-reading.
			return deleteAnswer(uid, "deleting", f.kube.OrphanExternalSecret(ctx, name, uid, resourceVersion))
		},
	}
}

// resolveOrphan re-reads after an orphan delete whose outcome is unknown:
// gone or being deleted is ours; another UID is someone else's object
// (refused, external-secret-replaced); the same one still there is checked
// again exactly as before a first delete, and deleted again only if it is
// still generator-backed, with the preconditions of this read.
func (f *family) resolveOrphan(ctx context.Context, name string, call store.Record) (workflow.Verdict, error) {
	es, err := f.kube.GetExternalSecret(ctx, name)
	summary := f.externalSummary(name)
	if v, settled := workflow.ResolveDelete(call, es, err, workflow.DeleteVerdicts{
		Gone:        workflow.Verdict{Kind: workflow.Ours, Reason: "gone"},
		Replaced:    workflow.Verdict{Kind: workflow.Theirs, Reason: ReasonExternalReplaced, Summary: summary},
		Terminating: workflow.Verdict{Kind: workflow.Ours, Reason: "deleting"},
	}); settled {
		return v, nil
	}
	v := workflow.Verdict{UID: string(es.GetUID()), ResourceVersion: es.GetResourceVersion(),
		Detail: externalObservation(es).Detail}
	if reason := f.invalidExternal(es); reason != "" {
		v.Kind, v.Reason, v.Summary = workflow.Theirs, store.Reason(reason), summary
		return v, nil
	}
	v.Kind, v.Reason, v.Retry = workflow.NotApplied, "resource-version-unchanged", f.orphanCall(name, es.GetUID(), es.GetResourceVersion())
	if es.GetResourceVersion() != call.ResourceVersion {
		v.Reason = reasonResourceVersionMoved
	}
	return v, nil
}

// deleteGenerator retires each listed Password generator once every
// adopted ExternalSecret is gone (nothing regenerates a value after that).
// Each is read first (the read is journaled with the call) and deleted with
// that read's UID and resourceVersion as preconditions; an absent one is
// journaled as such and not deleted.
func (f *family) deleteGenerator(ctx context.Context, p *progress) (*workflow.Decision, error) {
	for _, g := range f.cmd.Spec.GeneratorNames() {
		if _, done := p.generatorsDeleted[g]; done {
			continue
		}
		gen, err := f.kube.GetPasswordGenerator(ctx, g)
		if isNotFound(err) {
			p.note(store.Record{Kind: store.RecordObservation, Step: stepReadGenerator, Target: f.target(store.TargetPassword, g), Status: statusAbsent})
			continue
		}
		if err != nil {
			return nil, kubeErr(err)
		}
		obs := store.Record{Kind: store.RecordObservation, Step: stepReadGenerator, Target: f.target(store.TargetPassword, g),
			UID: string(gen.GetUID()), ResourceVersion: gen.GetResourceVersion(), Status: statusPresent,
			Detail: store.DetailOf(generatorDetail{Terminating: gen.GetDeletionTimestamp() != nil})}
		return &workflow.Decision{Notes: []store.Record{obs}, Call: f.deleteGeneratorCall(g, gen.GetUID(), gen.GetResourceVersion())}, nil
	}
	return nil, nil
}

func (f *family) deleteGeneratorCall(name string, uid types.UID, resourceVersion string) *workflow.Call {
	return &workflow.Call{
		Step: stepDeleteGenerator, Verb: workflow.VerbDelete, Target: f.target(store.TargetPassword, name), UID: string(uid), ResourceVersion: resourceVersion,
		Send: func(ctx context.Context) workflow.Answer {
			return deleteAnswer(uid, "deleted", f.kube.DeletePasswordGenerator(ctx, name, uid, resourceVersion))
		},
	}
}

// resolveDeleteGenerator re-reads after a generator delete whose outcome is
// unknown. Gone, or being deleted: ours. Another UID: the generator the call
// named is gone and someone created a new one; that one is not deleted
// (ours, "replaced-not-deleted"). The same generator still there: deleted
// again with the preconditions of this (journaled) read.
func (f *family) resolveDeleteGenerator(ctx context.Context, name string, call store.Record) (workflow.Verdict, error) {
	gen, err := f.kube.GetPasswordGenerator(ctx, name)
	if v, settled := workflow.ResolveDelete(call, gen, err, workflow.DeleteVerdicts{
		Gone:        workflow.Verdict{Kind: workflow.Ours, Reason: "gone"},
		Replaced:    workflow.Verdict{Kind: workflow.Ours, Reason: reasonReplacedNotDeleted, Detail: store.DetailOf(replacedGeneratorDetail{DeletedUID: call.UID})},
		Terminating: workflow.Verdict{Kind: workflow.Ours, Reason: "deleting"},
	}); settled {
		return v, nil
	}
	v := workflow.Verdict{Kind: workflow.NotApplied, Reason: "resource-version-unchanged", UID: string(gen.GetUID()),
		ResourceVersion: gen.GetResourceVersion(), Retry: f.deleteGeneratorCall(name, gen.GetUID(), gen.GetResourceVersion())}
	if gen.GetResourceVersion() != call.ResourceVersion {
		v.Reason = reasonResourceVersionMoved
	}
	return v, nil
}
