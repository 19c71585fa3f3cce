package credentials

import (
	"fmt"

	"github.com/keyledger/keyledger/store"
)

// The records a credential plan journals, one type a detail (and one a
// summary): their JSON form is the journal's schema. The family decides
// from these types, never from a key read out of a detail;
// TestRecordsReadTodaysJournal reads the details journaled before they
// were typed.

// preparationDetail is the preparation record's detail: planned names,
// never values.
type preparationDetail struct {
	Owner           string   `json:"owner"`
	PlanDigest      string   `json:"planDigest"`
	Secrets         []string `json:"secrets"`
	ExternalSecrets []string `json:"externalSecrets"`
	Generators      []string `json:"generators"`
	Pods            []string `json:"pods"`
}

// changeDetail is what an existing Secret lacks (a patch-secret call, its
// resolution): key and label names, a count of owner references, never
// values.
type changeDetail struct {
	AddKeys        []string `json:"addKeys,omitempty"`
	AddLabels      []string `json:"addLabels,omitempty"`
	RemoveOwners   int      `json:"removeOwners,omitempty"`
	RemoveTracking bool     `json:"removeTracking,omitempty"`
	RemoveInstance bool     `json:"removeInstance,omitempty"`
}

// secretDetail is what a read of a planned Secret found: a read-secret
// observation (what it lacks and whether that is nothing; with the
// authorship when a patch follows), the resolution of a create that found
// a Secret in place (kept-existing, or refused: whether it looks like one
// keyledger made), and the create's applied answer or created-by-this
// resolution (authorship only). Complete and LookAlike are written only by
// the records that state them.
type secretDetail struct {
	changeDetail
	Complete   *bool      `json:"complete,omitempty"`
	LookAlike  *bool      `json:"lookAlike,omitempty"`
	Authorship Authorship `json:"authorship,omitempty"`
	// By is the run that proved the authorship, when an earlier one did.
	By string `json:"by,omitempty"`
}

// complete: the read found nothing lacking.
func (d secretDetail) complete() bool { return d.Complete != nil && *d.Complete }

// createDetail is a create-secret call's detail: the planned key names.
type createDetail struct {
	Keys []string `json:"keys"`
}

// chunkDetail is a read-secrets observation: the planned Secrets of one
// chunk (secrets/<n>) found complete, by name.
type chunkDetail struct {
	Complete map[string]chunkEntry `json:"complete"`
}

// chunkEntry is one Secret of a read-secrets record.
type chunkEntry struct {
	UID        string     `json:"uid"`
	Authorship Authorship `json:"authorship"`
	By         string     `json:"by,omitempty"`
	LookAlike  bool       `json:"lookAlike,omitempty"`
}

// deletePodDetail is a delete-pod call's detail: why the server is
// restarted, onto which Secret (and its authorship), and the cause the
// restart answers (its digest is the call's).
type deletePodDetail struct {
	Why        string      `json:"why"`
	Secret     string      `json:"secret"`
	Authorship Authorship  `json:"authorship"`
	Cause      causeDetail `json:"cause"`
}

// causeDetail is a restart's cause as journaled.
type causeDetail struct {
	SecretResourceVersion string `json:"secretResourceVersion"`
	Controller            string `json:"controller"`
	Revision              string `json:"revision"`
	Spec                  string `json:"spec"`
}

// probeDetail is a probe-server record's detail: how the server was (or
// would have been) asked.
type probeDetail struct {
	Protocol string `json:"protocol"`
	Port     int    `json:"port"`
	// NotOwned is the check a pod failed that is not tied to its live
	// controller (reason server-not-owned): nothing was sent to it.
	NotOwned string `json:"notOwned,omitempty"`
}

// externalSecretsDetail is the read-external-secrets observation: how many
// ExternalSecrets were read and how many were absent.
type externalSecretsDetail struct {
	Read   int `json:"read"`
	Absent int `json:"absent"`
}

// externalSecretDetail is a read-external-secret observation (and an
// orphan's resolution): what was checked, never its spec.
type externalSecretDetail struct {
	GeneratorBacked bool `json:"generatorBacked"`
	TargetName      bool `json:"targetName"`
	Terminating     bool `json:"terminating"`
}

// orphanDetail is an orphan-external-secret call's detail.
type orphanDetail struct {
	PropagationPolicy string `json:"propagationPolicy"`
	ListedInAdopt     bool   `json:"listedInAdopt"`
}

// generatorDetail is a read-generator observation of a present generator.
type generatorDetail struct {
	Terminating bool `json:"terminating"`
}

// replacedGeneratorDetail is the resolution of a generator delete that
// found another generator of the name: the UID the call deleted.
type replacedGeneratorDetail struct {
	DeletedUID string `json:"deletedUID"`
}

// runSummary is what every refusal's summary says: the run's operation
// (its journal mutation ID).
type runSummary struct {
	Run string `json:"run"`
}

// withRun adds the run's operation to a summary (the summary's own run,
// when it names one, wins).
func withRun(run string, summary store.Detail) store.Detail {
	return store.Merge(store.DetailOf(runSummary{Run: run}), summary)
}

// secretSummary names a planned Secret in a refusal (and, with the run,
// in a create's).
type secretSummary struct {
	Namespace string `json:"namespace"`
	Secret    string `json:"secret"`
	Run       string `json:"run,omitempty"`
}

// externalSummary names an ExternalSecret in a refusal.
type externalSummary struct {
	Namespace      string `json:"namespace"`
	ExternalSecret string `json:"externalSecret"`
	ListedInAdopt  bool   `json:"listedInAdopt"`
}

// podSummary names a server pod in a refusal: with the run that restarted
// it when it was restarted once for the same cause.
type podSummary struct {
	Namespace   string `json:"namespace"`
	Pod         string `json:"pod"`
	RestartedBy string `json:"restartedBy,omitempty"`
	Detail      string `json:"detail,omitempty"`
	// Secret and Authorship: the Secret a refusing server was (or would
	// have been) restarted onto, and where it came from.
	Secret     string     `json:"secret,omitempty"`
	Authorship Authorship `json:"authorship,omitempty"`
}

// notOwnedSummary names, in a server-not-owned refusal, each server pod
// not tied to its live controller and the check it failed.
type notOwnedSummary struct {
	Namespace string        `json:"namespace"`
	NotOwned  []notOwnedPod `json:"notOwned"`
}

// notOwnedPod is one pod of a notOwnedSummary.
type notOwnedPod struct {
	Pod   string `json:"pod"`
	Check string `json:"check"`
}

// completionSummary is the content-free completion summary: counts and
// names, all from the journal.
type completionSummary struct {
	Namespace string            `json:"namespace"`
	Owner     string            `json:"owner"`
	Run       string            `json:"run"`
	Secrets   secretCounts      `json:"secrets"`
	Authored  map[string]string `json:"authorship"`
	// ExternalSecretsDeleted and GeneratorsDeleted count what this plan
	// retired.
	ExternalSecretsDeleted int `json:"externalSecretsDeleted"`
	GeneratorsDeleted      int `json:"generatorsDeleted"`
	// ServerSummary is there when the plan names servers.
	*ServerSummary
}

// secretCounts counts the planned Secrets by what this run did with them.
type secretCounts struct {
	Planned int `json:"planned"`
	Created int `json:"created"`
	Patched int `json:"patched"`
	// Existing: found in place and not created by this run (whatever its
	// annotations say); Unchanged: not written by this run.
	Existing  int `json:"existing"`
	Unchanged int `json:"unchanged"`
	// Unproven: kept as found, neither created by a run of this plan nor
	// adopted (see Authorship).
	Unproven int `json:"unproven"`
}

// ServerSummary is the part of a completion summary about the plan's
// servers (exported only so that encoding/json can decode it embedded).
type ServerSummary struct {
	Servers  serverCounts     `json:"servers"`
	Restarts []restartSummary `json:"restarts"`
}

// serverCounts counts the servers by their newest probe.
type serverCounts struct {
	Accepted int `json:"accepted"`
	Skipped  int `json:"skipped"`
	Repaired int `json:"repaired"`
}

// restartSummary is one pod this run restarted, onto which Secret.
type restartSummary struct {
	Pod        string     `json:"pod"`
	Secret     string     `json:"secret"`
	Authorship Authorship `json:"authorship"`
}

// detailOf reads r's detail into its record type T.
func detailOf[T any](r store.Record) (T, error) {
	v, err := store.DecodeDetail[T](r.Detail)
	if err != nil {
		return v, fmt.Errorf("reading the %s record of %s %s: %w", r.Kind, r.Step, r.Target, err)
	}
	return v, nil
}

// target is the object of kind named name in the plan's namespace.
func (f *family) target(kind store.TargetKind, name string) store.Target {
	return store.Target{Kind: kind, Namespace: f.cmd.Spec.Namespace, Name: name}
}
