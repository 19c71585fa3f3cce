package suite

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/netip"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/keyledger/keyledger/integration/platform"
	"github.com/keyledger/keyledger/workflow/command"
	"github.com/keyledger/keyledger/workflow/versioned"
)

// InstallCNPGClusterCRD installs CloudNativePG's published Cluster CRD
// (testdata/cnpg, see NOTE.md there) and waits until it is served.
// Server-side apply makes it idempotent across tests.
func (e *Env) InstallCNPGClusterCRD(a *Applier) {
	e.T.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "cnpg", "postgresql.cnpg.io_clusters.yaml"))
	require.NoError(e.T, err)
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 64<<10)
	var crd *unstructured.Unstructured
	for {
		var m map[string]any
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			break
		} else {
			require.NoError(e.T, err)
		}
		if len(m) > 0 {
			require.Nil(e.T, crd, "one CRD expected in the file")
			crd = &unstructured.Unstructured{Object: m}
		}
	}
	require.NotNil(e.T, crd)
	require.Equal(e.T, "CustomResourceDefinition", crd.GetKind())
	_, err = a.Apply(e.T.Context(), crd, "", false)
	require.NoError(e.T, err, "installing the CloudNativePG Cluster CRD")
	ctx, cancel := context.WithTimeout(e.T.Context(), 60*time.Second)
	defer cancel()
	crds := a.Dyn.Resource(CRDResource)
	err = wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		got, err := crds.Get(ctx, crd.GetName(), metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if m["type"] == "Established" && m["status"] == "True" {
				return true, nil
			}
		}
		return false, nil
	})
	require.NoError(e.T, err, "the Cluster CRD never became Established")
	require.NoError(e.T, a.WaitForKind(e.T.Context(), "postgresql.cnpg.io", "v1", "Cluster"))
}

// The findings audit reports, one stable word each.
const (
	FindingWildcard          = "wildcard"
	FindingNoResourceNames   = "no-resource-names"
	FindingResourceNames     = "resource-names-not-one"
	FindingWriteRight        = "write-right-outside-allowlist"
	FindingAutomount         = "automount-not-off"
	FindingWritableRoot      = "writable-root-filesystem"
	FindingPrivilegeEsc      = "privilege-escalation"
	FindingNonRoot           = "run-as-root-allowed"
	FindingSeccomp           = "seccomp-missing"
	FindingCapabilities      = "capabilities-not-dropped"
	FindingMemoryLimit       = "memory-limit-missing"
	FindingEgressWide        = "egress-wider-than-host"
	FindingEgressTemplate    = "egress-outside-template"
	FindingEgressUnfenced    = "pod-not-fenced"
	FindingCommandMutable    = "command-configmap-mutable"
	FindingCommandMount      = "command-mount-not-subpath-file"
	FindingInitMounts        = "init-container-has-mounts"
	FindingTokenLifetime     = "token-lifetime"
	FindingTokenMount        = "token-mount"
	FindingJobRetries        = "job-retries"
	FindingADRUser           = "adr-0262-user-not-10001"
	FindingADRMemory         = "adr-0262-memory-limit-not-128Mi"
	FindingADRDeadline       = "adr-0262-active-deadline"
	FindingADRBackoff        = "adr-0262-backoff-limit"
	FindingADRToken          = "adr-0262-token"
	CommandConfigMapPrefix   = "keyledger-command"
	CommandSecretPrefix      = "keyledger-versioned-command" // versioned commands hold values
	ControlComponent         = "preflight-control"
	InClusterServiceAccount  = "/var/run/secrets/kubernetes.io/serviceaccount"
	MaxTokenExpirationSecond = 600
)

// Audit walks rendered objects and returns every violation of the
// deployment's rules, as "finding: where".
func Audit(objs []*unstructured.Unstructured) []string {
	a := &Auditor{}
	var policies []networkingv1.NetworkPolicy
	var jobs []batchv1.Job
	commandMaps := map[string]bool{} // name -> immutable
	for _, obj := range objs {
		where := obj.GetKind() + "/" + obj.GetName()
		switch obj.GetKind() {
		case "Role", "ClusterRole":
			var r rbacv1.Role // ClusterRole's rules decode the same way
			a.Convert(obj, &r)
			a.Rules(where, obj.GetKind() == "ClusterRole", r.Rules)
		case "ServiceAccount":
			var sa corev1.ServiceAccount
			a.Convert(obj, &sa)
			if sa.AutomountServiceAccountToken == nil || *sa.AutomountServiceAccountToken {
				a.Add(FindingAutomount, where)
			}
		case "ConfigMap":
			var cm corev1.ConfigMap
			a.Convert(obj, &cm)
			if strings.HasPrefix(cm.Name, CommandConfigMapPrefix) {
				commandMaps[cm.Name] = cm.Immutable != nil && *cm.Immutable
			}
		case "Secret":
			var sec corev1.Secret
			a.Convert(obj, &sec)
			if strings.HasPrefix(sec.Name, CommandSecretPrefix) {
				commandMaps[sec.Name] = sec.Immutable != nil && *sec.Immutable
			}
		case "NetworkPolicy":
			var np networkingv1.NetworkPolicy
			a.Convert(obj, &np)
			policies = append(policies, np)
			a.Egress(where, np)
		case "Job":
			var j batchv1.Job
			a.Convert(obj, &j)
			jobs = append(jobs, j)
		case "Pod", "Deployment", "StatefulSet", "DaemonSet", "CronJob", "ReplicaSet":
			a.Add("unexpected-workload", where)
		}
	}
	for _, j := range jobs {
		a.Job("Job/"+j.Name, j, policies, commandMaps)
	}
	return a.Findings
}

type Auditor struct{ Findings []string }

func (a *Auditor) Add(finding, where string, detail ...any) {
	a.Findings = append(a.Findings, strings.TrimSpace(finding+": "+where+" "+fmt.Sprint(detail...)))
}

func (a *Auditor) Convert(obj *unstructured.Unstructured, into any) {
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, into); err != nil {
		a.Add("undecodable", obj.GetKind()+"/"+obj.GetName(), err)
	}
}

// WriteVerbs are the verbs that change something.
var WriteVerbs = []string{"create", "update", "patch", "delete", "deletecollection", "escalate", "bind", "impersonate", "approve", "sign"}

func (a *Auditor) Rules(where string, cluster bool, rules []rbacv1.PolicyRule) {
	// A versioned write's Role is exactly the family's declaration for its
	// one live Secret (namespace-wide get, list, create and delete cannot be
	// narrowed: snapshot names derive from the live UID).
	if !cluster && len(rules) == 2 && len(rules[1].ResourceNames) == 1 &&
		reflect.DeepEqual(rules, versioned.Rules(rules[1].ResourceNames[0])) {
		return
	}
	for i, r := range rules {
		at := fmt.Sprintf("%s rule %d", where, i)
		for _, list := range [][]string{r.Verbs, r.Resources, r.APIGroups, r.ResourceNames, r.NonResourceURLs} {
			for _, v := range list {
				if strings.Contains(v, "*") {
					a.Add(FindingWildcard, at, v)
				}
			}
		}
		accessReview := len(r.APIGroups) == 1 && r.APIGroups[0] == "authorization.k8s.io" &&
			slices.Equal(r.Resources, []string{"selfsubjectaccessreviews", "selfsubjectrulesreviews"}) && slices.Equal(r.Verbs, []string{"create"})
		keyring := !cluster && len(r.APIGroups) == 1 && r.APIGroups[0] == "" &&
			slices.Equal(r.Resources, []string{"secrets"})
		switch {
		case accessReview:
			// create carries no name: resourceNames cannot apply.
		case len(r.ResourceNames) == 0:
			a.Add(FindingNoResourceNames, at)
		case keyring && len(r.ResourceNames) != 1:
			a.Add(FindingResourceNames, at, r.ResourceNames)
		}
		for _, v := range r.Verbs {
			if !slices.Contains(WriteVerbs, v) && v != "*" {
				continue
			}
			if accessReview || (keyring && v == "update") {
				continue
			}
			a.Add(FindingWriteRight, at, v)
		}
	}
}

// CommandSource names the command ConfigMap (or, for versioned writes, the
// command Secret) a volume mounts, or "".
func CommandSource(v corev1.Volume) string {
	switch {
	case v.ConfigMap != nil && strings.HasPrefix(v.ConfigMap.Name, CommandConfigMapPrefix):
		return v.ConfigMap.Name
	case v.Secret != nil && strings.HasPrefix(v.Secret.SecretName, CommandSecretPrefix):
		return v.Secret.SecretName
	}
	return ""
}

// The egress rules a policy may hold, each matching one template exactly.
func (a *Auditor) Egress(where string, np networkingv1.NetworkPolicy) {
	if !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress) {
		a.Add(FindingEgressTemplate, where, "egress not restricted")
	}
	for i, r := range np.Spec.Egress {
		at := fmt.Sprintf("%s egress %d", where, i)
		if len(r.To) != 1 || len(r.Ports) == 0 {
			a.Add(FindingEgressTemplate, at, "want exactly one peer and explicit ports")
			continue
		}
		peer := r.To[0]
		switch {
		case peer.IPBlock != nil:
			p, err := netip.ParsePrefix(peer.IPBlock.CIDR)
			if err != nil || p.Bits() != p.Addr().BitLen() || len(peer.IPBlock.Except) != 0 {
				a.Add(FindingEgressWide, at, peer.IPBlock.CIDR)
			}
			if peer.PodSelector != nil || peer.NamespaceSelector != nil || len(r.Ports) != 1 ||
				!TCPPort(r.Ports[0], -1) {
				a.Add(FindingEgressTemplate, at, "want one /32 and one TCP port")
			}
		case IsDNS(peer):
			for _, p := range r.Ports {
				if p.Port == nil || p.Port.IntValue() != 53 || p.EndPort != nil {
					a.Add(FindingEgressTemplate, at, "DNS rule beyond port 53")
				}
			}
		case IsJournal(peer):
			if len(r.Ports) != 1 || !TCPPort(r.Ports[0], 5432) {
				a.Add(FindingEgressTemplate, at, "want TCP 5432 to the primary or its pooler")
			}
		default:
			a.Add(FindingEgressTemplate, at, "peer is not DNS, a CloudNativePG primary or pooler, or one API server address")
		}
	}
}

func TCPPort(p networkingv1.NetworkPolicyPort, want int) bool {
	if p.Protocol == nil || *p.Protocol != corev1.ProtocolTCP || p.Port == nil || p.EndPort != nil {
		return false
	}
	n := p.Port.IntValue()
	return n > 0 && (want < 0 || n == want) && p.Port.String() == fmt.Sprint(n)
}

func IsDNS(p networkingv1.NetworkPolicyPeer) bool {
	return p.IPBlock == nil && p.NamespaceSelector != nil && p.PodSelector != nil &&
		len(p.NamespaceSelector.MatchExpressions) == 0 && len(p.PodSelector.MatchExpressions) == 0 &&
		MapsEqual(p.NamespaceSelector.MatchLabels, map[string]string{"kubernetes.io/metadata.name": "kube-system"}) &&
		MapsEqual(p.PodSelector.MatchLabels, map[string]string{"k8s-app": "kube-dns"})
}

// IsJournal: a CloudNativePG primary's pods, or one Pooler's pods
// (cnpg.io/poolerName alone: a Pooler's pods carry the Cluster's label too,
// so a selector naming only the Cluster would reach every instance), in the
// policy's namespace (the schema owner's Jobs beside the journal) or in
// exactly one namespace named by its kubernetes.io/metadata.name label (a
// served namespace's Jobs).
func IsJournal(p networkingv1.NetworkPolicyPeer) bool {
	if p.IPBlock != nil || p.PodSelector == nil || len(p.PodSelector.MatchExpressions) != 0 {
		return false
	}
	if ns := p.NamespaceSelector; ns != nil && (len(ns.MatchExpressions) != 0 || len(ns.MatchLabels) != 1 || ns.MatchLabels["kubernetes.io/metadata.name"] == "") {
		return false
	}
	l := p.PodSelector.MatchLabels
	primary := len(l) == 2 && l["cnpg.io/cluster"] != "" && l["cnpg.io/instanceRole"] == "primary"
	pooler := len(l) == 1 && l["cnpg.io/poolerName"] != ""
	return primary || pooler
}

func MapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// ADR-0262's Job numbers, exactly: a drift either way is a finding.
const (
	ADRUser          = 10001 // runAsUser and runAsGroup (and fsGroup where set)
	ADRMemoryLimit   = "128Mi"
	ADRDeadline      = 300 // activeDeadlineSeconds
	ADRBackoffLimit  = 0
	ADRTokenLifetime = 600 // the projected token's expirationSeconds
	// The control Job (component preflight-control) only proves the
	// network gate: no token, no journal, and a shorter deadline of its
	// own, pinned as exactly.
	ControlDeadline = 120
)

// JobNumbers is what ADR-0262 pins for one kind of keyledger Job.
type JobNumbers struct {
	Deadline, Backoff int64
	// token: the pod mounts exactly one projected token, of adrTokenLifetime
	// (a Job that talks to the API server); false: no token at all.
	Token bool
}

// NumbersFor says what a Job of deploy/ must carry, by its component label.
func NumbersFor(j batchv1.Job) JobNumbers {
	switch j.Spec.Template.Labels["app.kubernetes.io/component"] {
	case ControlComponent:
		return JobNumbers{Deadline: ControlDeadline, Backoff: ADRBackoffLimit}
	case "migrate", "grant", "inspect": // the journal's schema-owner Jobs: PostgreSQL only
		return JobNumbers{Deadline: ADRDeadline, Backoff: ADRBackoffLimit}
	default: // retire, versioned: they call the API server
		return JobNumbers{Deadline: ADRDeadline, Backoff: ADRBackoffLimit, Token: true}
	}
}

// ADRNumbers reports every number of j that is not exactly want's (and
// ADR-0262's user and memory limit, which every keyledger Job shares).
func (a *Auditor) ADRNumbers(where string, j batchv1.Job, want JobNumbers) {
	if j.Spec.ActiveDeadlineSeconds == nil || *j.Spec.ActiveDeadlineSeconds != want.Deadline {
		a.Add(FindingADRDeadline, where, "want ", want.Deadline)
	}
	if j.Spec.BackoffLimit == nil || int64(*j.Spec.BackoffLimit) != want.Backoff {
		a.Add(FindingADRBackoff, where, "want ", want.Backoff)
	}
	pod := j.Spec.Template.Spec
	is := func(p *int64) bool { return p != nil && *p == ADRUser }
	if psc := pod.SecurityContext; psc == nil || !is(psc.RunAsUser) || !is(psc.RunAsGroup) || (psc.FSGroup != nil && !is(psc.FSGroup)) {
		a.Add(FindingADRUser, where, "pod")
	}
	limit := resource.MustParse(ADRMemoryLimit)
	for _, c := range append(slices.Clone(pod.InitContainers), pod.Containers...) {
		if sc := c.SecurityContext; sc != nil && ((sc.RunAsUser != nil && !is(sc.RunAsUser)) || (sc.RunAsGroup != nil && !is(sc.RunAsGroup))) {
			a.Add(FindingADRUser, where, "container ", c.Name)
		}
		if m, ok := c.Resources.Limits[corev1.ResourceMemory]; !ok || m.Cmp(limit) != 0 {
			a.Add(FindingADRMemory, where, "container ", c.Name)
		}
	}
	tokens := 0
	for _, v := range pod.Volumes {
		if v.Projected == nil {
			continue
		}
		for _, src := range v.Projected.Sources {
			if t := src.ServiceAccountToken; t != nil {
				tokens++
				if t.ExpirationSeconds == nil || *t.ExpirationSeconds != ADRTokenLifetime {
					a.Add(FindingADRToken, where, "volume ", v.Name, " want expirationSeconds ", ADRTokenLifetime)
				}
			}
		}
	}
	if want.Token != (tokens == 1) || tokens > 1 {
		a.Add(FindingADRToken, where, fmt.Sprintf("%d projected tokens, want %d", tokens, map[bool]int{true: 1}[want.Token]))
	}
}

func (a *Auditor) Job(where string, j batchv1.Job, policies []networkingv1.NetworkPolicy, commandMaps map[string]bool) {
	a.ADRNumbers(where, j, NumbersFor(j))
	if j.Spec.BackoffLimit == nil || *j.Spec.BackoffLimit != 0 || j.Spec.ActiveDeadlineSeconds == nil ||
		*j.Spec.ActiveDeadlineSeconds > 300 || j.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyNever {
		a.Add(FindingJobRetries, where)
	}
	pod := j.Spec.Template.Spec
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		a.Add(FindingAutomount, where)
	}
	// Every pod but the control run's is selected by an egress policy.
	if j.Spec.Template.Labels["app.kubernetes.io/component"] != ControlComponent {
		fenced := false
		for _, np := range policies {
			sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
			if err == nil && !sel.Empty() && sel.Matches(labels.Set(j.Spec.Template.Labels)) &&
				slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress) {
				fenced = true
			}
		}
		if !fenced {
			a.Add(FindingEgressUnfenced, where)
		}
	}
	volumes := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		volumes[v.Name] = v
		if v.Projected != nil {
			var files []string // what client-go's in-cluster config reads
			token := false
			for _, s := range v.Projected.Sources {
				if t := s.ServiceAccountToken; t != nil {
					token = true
					files = append(files, t.Path)
					if t.ExpirationSeconds == nil || *t.ExpirationSeconds > MaxTokenExpirationSecond {
						a.Add(FindingTokenLifetime, where+" volume "+v.Name)
					}
				}
				if s.ConfigMap != nil && s.ConfigMap.Name == "kube-root-ca.crt" {
					for _, item := range s.ConfigMap.Items {
						files = append(files, item.Path)
					}
				}
				if s.DownwardAPI != nil {
					for _, item := range s.DownwardAPI.Items {
						if item.FieldRef != nil && item.FieldRef.FieldPath == "metadata.namespace" {
							files = append(files, item.Path)
						}
					}
				}
			}
			slices.Sort(files)
			if token && !slices.Equal(files, []string{"ca.crt", "namespace", "token"}) {
				a.Add(FindingTokenMount, where+" volume "+v.Name, "want token, ca.crt and namespace, got ", files)
			}
		}
	}
	psc := pod.SecurityContext
	if psc == nil {
		psc = &corev1.PodSecurityContext{}
	}
	for _, c := range pod.InitContainers {
		if len(c.VolumeMounts) != 0 {
			a.Add(FindingInitMounts, where+" init container "+c.Name)
		}
	}
	tokenMounts := 0
	all := append(slices.Clone(pod.InitContainers), pod.Containers...)
	for _, c := range all {
		at := where + " container " + c.Name
		sc := c.SecurityContext
		if sc == nil {
			sc = &corev1.SecurityContext{}
		}
		if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			a.Add(FindingWritableRoot, at)
		}
		if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || (sc.Privileged != nil && *sc.Privileged) {
			a.Add(FindingPrivilegeEsc, at)
		}
		nonRoot := (sc.RunAsNonRoot != nil && *sc.RunAsNonRoot) || (sc.RunAsNonRoot == nil && psc.RunAsNonRoot != nil && *psc.RunAsNonRoot)
		if !nonRoot || (sc.RunAsUser != nil && *sc.RunAsUser == 0) || (psc.RunAsUser != nil && *psc.RunAsUser == 0) {
			a.Add(FindingNonRoot, at)
		}
		seccomp := sc.SeccompProfile
		if seccomp == nil {
			seccomp = psc.SeccompProfile
		}
		if seccomp == nil || seccomp.Type != corev1.SeccompProfileTypeRuntimeDefault {
			a.Add(FindingSeccomp, at)
		}
		if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) != 0 {
			a.Add(FindingCapabilities, at)
		}
		if _, ok := c.Resources.Limits[corev1.ResourceMemory]; !ok {
			a.Add(FindingMemoryLimit, at)
		}
		for _, m := range c.VolumeMounts {
			v := volumes[m.Name]
			if v.Projected != nil && slices.ContainsFunc(v.Projected.Sources, func(s corev1.VolumeProjection) bool { return s.ServiceAccountToken != nil }) {
				tokenMounts++
				if m.MountPath != InClusterServiceAccount || !m.ReadOnly {
					a.Add(FindingTokenMount, at, m.MountPath)
				}
			}
			source := CommandSource(v)
			if source == "" {
				continue
			}
			immutable, known := commandMaps[source]
			if !known || !immutable {
				a.Add(FindingCommandMutable, at, source)
			}
			// The command is one regular file: a subPath mount, read-only, at
			// the absolute path `keyledger run` is given.
			if m.SubPath == "" || !m.ReadOnly || !path.IsAbs(m.MountPath) || path.Base(m.MountPath) != path.Base(m.SubPath) ||
				!slices.Contains(c.Args, m.MountPath) {
				a.Add(FindingCommandMount, at, m.MountPath)
			}
		}
		if len(c.Args) > 0 && c.Args[0] == "run" && !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
			return CommandSource(volumes[m.Name]) != "" && m.MountPath == c.Args[len(c.Args)-1]
		}) {
			a.Add(FindingCommandMount, at, "run's command file is not a command ConfigMap or Secret mount")
		}
	}
	if tokenMounts > 1 {
		a.Add(FindingTokenMount, where, "more than one container mounts a token")
	}
}

// DeployFS is the repository's deploy/ tree copied into an in-memory
// filesystem at /deploy, so tests can add private overlays beside it
// without writing into the work tree.
func DeployFS(t *testing.T) filesys.FileSystem {
	t.Helper()
	mem := filesys.MakeFsInMemory()
	root := filepath.Join(platform.RepoRoot(), "deploy")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return mem.WriteFile(filepath.Join("/deploy", rel), data)
	})
	require.NoError(t, err)
	return mem
}

// Render builds the kustomization at dir in fsys with the kustomize Go API
// (the same engine as `kubectl kustomize`) and returns its objects.
func Render(t *testing.T, fsys filesys.FileSystem, dir string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := TryRender(fsys, dir)
	require.NoError(t, err, "kustomize build %s", dir)
	require.NotEmpty(t, objs, "kustomize build %s rendered nothing", dir)
	return objs
}

func TryRender(fsys filesys.FileSystem, dir string) ([]*unstructured.Unstructured, error) {
	rm, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(fsys, dir)
	if err != nil {
		return nil, err
	}
	var objs []*unstructured.Unstructured
	for _, r := range rm.Resources() {
		// Through JSON, so numbers are int64 as in every client object.
		data, err := r.MarshalJSON()
		if err != nil {
			return nil, err
		}
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(data); err != nil {
			return nil, err
		}
		objs = append(objs, obj)
	}
	return objs, nil
}

// PrivateOverlay is what an operator fills in for one retirement, written
// exactly as deploy/README.md tells them to.
type PrivateOverlay struct {
	Namespace  string
	NameSuffix string
	SecretName string
	Canary     string
	Command    []byte
	// APIServerIP and APIServerPort, when set, add a filled copy of
	// components/api-egress.
	APIServerIP   string
	APIServerPort int
	// ForgetImmutable leaves out the generator's immutable option (an
	// operator's mistake the audit must catch).
	ForgetImmutable bool
	// ImageName and ImageTag, when set, are the images: entry's newName and
	// newTag (default: newTag test).
	ImageName, ImageTag string
	// Pooled adds components/cloudnativepg-pooler: the journal through its
	// session pooler.
	Pooled bool
	// MutationID, when set, fills the Job's mutation ID label and
	// annotation as deploy/README.md says (labels, commonAnnotations).
	MutationID string
}

// Write lays the overlay out at /private in fsys and returns its path.
func (o PrivateOverlay) Write(t *testing.T, fsys filesys.FileSystem) string {
	t.Helper()
	immutable := "  options:\n    immutable: true\n"
	if o.ForgetImmutable {
		immutable = ""
	}
	var components []string
	if o.APIServerIP != "" {
		components = append(components, "api-egress")
		FillAPIEgress(t, fsys, "/private", o.APIServerIP, o.APIServerPort)
	}
	if o.Pooled {
		components = append(components, "../deploy/components/cloudnativepg-pooler")
	}
	listed := ""
	if len(components) > 0 {
		listed = "components:\n- " + strings.Join(components, "\n- ") + "\n"
	}
	image := "  newTag: test\n"
	if o.ImageName != "" {
		image = fmt.Sprintf("  newName: %s\n  newTag: %s\n", o.ImageName, o.ImageTag)
	}
	mutation := ""
	if o.MutationID != "" {
		mutation = fmt.Sprintf("labels:\n- pairs:\n    keyledger.dev/mutation-id-hash: %q\n  includeTemplates: true\n"+
			"commonAnnotations:\n  keyledger.dev/mutation-id: %q\n", command.MutationIDHash(o.MutationID), o.MutationID)
	}
	kustomization := fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: "%[1]s"
nameSuffix: "-%[2]s"
resources:
- ../deploy/overlays/cloudnativepg
%[3]s%[8]sconfigMapGenerator:
- name: keyledger-command
  behavior: replace
  files:
  - command.json
%[4]spatches:
- target:
    kind: Role
    name: keyledger-retire
  patch: |-
    - op: replace
      path: /rules/0/resourceNames
      value: [%[5]q]
- target:
    kind: Job
    name: keyledger-retire
  patch: |-
    - op: replace
      path: /spec/template/spec/initContainers/0/env/0/value
      value: %[6]q
images:
- name: keyledger
%[7]s`, o.Namespace, o.NameSuffix, listed, immutable, o.SecretName, o.Canary, image, mutation)
	require.NoError(t, fsys.WriteFile("/private/kustomization.yaml", []byte(kustomization)))
	require.NoError(t, fsys.WriteFile("/private/command.json", o.Command))
	return "/private"
}

// FillAPIEgress copies components/api-egress into dir/api-egress with the
// API server endpoint filled in, as deploy/README.md tells an operator to.
func FillAPIEgress(t *testing.T, fsys filesys.FileSystem, dir, ip string, port int) {
	t.Helper()
	for _, name := range []string{"kustomization.yaml", "api-egress.yaml"} {
		data, err := fsys.ReadFile("/deploy/components/api-egress/" + name)
		require.NoError(t, err)
		filled := strings.NewReplacer("API_SERVER_IP", ip, "API_SERVER_PORT", fmt.Sprint(port)).Replace(string(data))
		require.NoError(t, fsys.WriteFile(dir+"/api-egress/"+name, []byte(filled)))
	}
}

// RenderPrivate renders o on top of a fresh copy of deploy/.
func RenderPrivate(t *testing.T, o PrivateOverlay) []*unstructured.Unstructured {
	t.Helper()
	fsys := DeployFS(t)
	return Render(t, fsys, o.Write(t, fsys))
}

// Find returns the one rendered object of kind whose name starts with
// prefix.
func Find(t *testing.T, objs []*unstructured.Unstructured, kind, prefix string) *unstructured.Unstructured {
	t.Helper()
	var found *unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind && strings.HasPrefix(o.GetName(), prefix) {
			require.Nil(t, found, "more than one %s named %s*", kind, prefix)
			found = o
		}
	}
	require.NotNil(t, found, "no %s named %s*", kind, prefix)
	return found
}

// Applier applies unstructured objects to the real API server with
// server-side apply, for real or as a dry run.
type Applier struct {
	Dyn    dynamic.Interface
	Mapper *restmapper.DeferredDiscoveryRESTMapper
}

func (e *Env) Applier() *Applier {
	e.T.Helper()
	cfg := e.Kube.Config()
	dyn, err := dynamic.NewForConfig(cfg)
	require.NoError(e.T, err)
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	require.NoError(e.T, err)
	return &Applier{Dyn: dyn, Mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))}
}

// Resource resolves obj's kind, placing namespaced objects without a
// namespace into ns.
func (a *Applier) Resource(obj *unstructured.Unstructured, ns string) (dynamic.ResourceInterface, error) {
	gvk := obj.GroupVersionKind()
	m, err := a.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, fmt.Errorf("mapping %s: %w", gvk, err)
	}
	if m.Scope.Name() != meta.RESTScopeNameNamespace {
		return a.Dyn.Resource(m.Resource), nil
	}
	if obj.GetNamespace() == "" {
		obj.SetNamespace(ns)
	}
	return a.Dyn.Resource(m.Resource).Namespace(obj.GetNamespace()), nil
}

// Apply server-side-applies obj (a dry run: DryRun All, nothing persisted,
// everything validated and admitted).
func (a *Applier) Apply(ctx context.Context, obj *unstructured.Unstructured, ns string, dryRun bool) (*unstructured.Unstructured, error) {
	ri, err := a.Resource(obj, ns)
	if err != nil {
		return nil, err
	}
	opts := metav1.ApplyOptions{FieldManager: "keyledger-deploy-test", Force: true}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	return ri.Apply(ctx, obj.GetName(), obj, opts)
}

// DryRunAll applies every object as a server-side dry run and fails the
// test on the first rejection.
func (a *Applier) DryRunAll(t *testing.T, objs []*unstructured.Unstructured, ns string) {
	t.Helper()
	for _, obj := range objs {
		_, err := a.Apply(t.Context(), obj.DeepCopy(), ns, true)
		require.NoError(t, err, "server-side dry run of %s %s", obj.GetKind(), obj.GetName())
	}
}

// WaitForKind waits until discovery serves gvk (after a CRD is installed).
func (a *Applier) WaitForKind(ctx context.Context, group, version, kind string) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	return wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(context.Context) (bool, error) {
		a.Mapper.Reset()
		_, err := a.Mapper.RESTMapping(schema.GroupKind{Group: group, Kind: kind}, version)
		return err == nil, nil
	})
}

var CRDResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// The journal's session pooler, as deploy/README.md ("A session pooler")
// tells an operator to add it: journal/pooler as a component of the
// journal's private overlay, components/cloudnativepg-pooler as a
// component of each served namespace's.
const (
	JournalPooler     = "keyledger-journal-pooler"
	JournalPoolerHost = JournalPooler + "." + JournalNamespace + ".svc"
)

// EnvValue is the value of the environment variable name of a Job's
// first container.
func EnvValue(t *testing.T, job *unstructured.Unstructured, name string) string {
	t.Helper()
	cs, _, _ := unstructured.NestedSlice(job.Object, "spec", "template", "spec", "containers")
	env, _, _ := unstructured.NestedSlice(cs[0].(map[string]any), "env")
	for _, e := range env {
		if m := e.(map[string]any); m["name"] == name {
			v, _ := m["value"].(string)
			return v
		}
	}
	t.Fatalf("%s: no env %s", job.GetName(), name)
	return ""
}

// JournalNamespace is the journal's namespace in deploy/journal: the one
// place the schema owner's and CloudNativePG's Secrets are.
const JournalNamespace = "keyledger-journal"

// JournalRole is a served namespace's journal role, as deploy/journal's
// Cluster names it: keyledger_ + the namespace with "-" turned into "_".
func JournalRole(ns string) string { return "keyledger_" + strings.ReplaceAll(ns, "-", "_") }

// TenancyImage is the keyledger image every rendered Job runs.
type TenancyImage struct{ Name, Tag string }

// RenderJournal renders deploy/journal (the namespace, the Cluster, the
// schema owner's ServiceAccount and fence, the migration Job) with image.
func RenderJournal(t *testing.T, img TenancyImage) []*unstructured.Unstructured {
	t.Helper()
	fsys := DeployFS(t)
	require.NoError(t, fsys.WriteFile("/my-journal/kustomization.yaml", []byte(fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- ../deploy/journal
images:
- name: keyledger
  newName: %s
  newTag: %s
`, img.Name, img.Tag))))
	return Render(t, fsys, "/my-journal")
}

// RenderGrant renders deploy/journal/grant for one served namespace, as
// deploy/README.md tells an operator to fill it in.
func RenderGrant(t *testing.T, ns string, img TenancyImage) []*unstructured.Unstructured {
	t.Helper()
	fsys := DeployFS(t)
	require.NoError(t, fsys.WriteFile("/my-grant/kustomization.yaml", []byte(fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- ../deploy/journal/grant
patches:
- target:
    kind: Job
    name: keyledger-grant
  patch: |-
    - op: replace
      path: /metadata/name
      value: keyledger-grant-%[1]s
    - op: replace
      path: /spec/template/spec/containers/0/args
      value: ["journal", "grant", %[2]q, %[1]q]
images:
- name: keyledger
  newName: %[3]s
  newTag: %[4]s
`, ns, JournalRole(ns), img.Name, img.Tag))))
	return Render(t, fsys, "/my-grant")
}

// RenderCredentialsFence renders deploy/credentials for ns with the API
// server endpoint filled in, and the other components listed (paths from
// the overlay's directory).
func RenderCredentialsFence(t *testing.T, ns, apiIP string, apiPort int, components ...string) []*unstructured.Unstructured {
	t.Helper()
	fsys := DeployFS(t)
	FillAPIEgress(t, fsys, "/my-credentials", apiIP, apiPort)
	listed := ""
	for _, c := range components {
		listed += "- " + c + "\n"
	}
	require.NoError(t, fsys.WriteFile("/my-credentials/kustomization.yaml", []byte(fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: %s
resources:
- ../deploy/credentials
components:
- api-egress
%s`, ns, listed))))
	return Render(t, fsys, "/my-credentials")
}

// KeyledgerServiceAccounts are the ServiceAccounts objs render, as
// namespace/name.
func KeyledgerServiceAccounts(objs []*unstructured.Unstructured) []ServiceAccountRef {
	var out []ServiceAccountRef
	for _, o := range objs {
		if o.GetKind() == "ServiceAccount" {
			out = append(out, ServiceAccountRef{Namespace: o.GetNamespace(), Name: o.GetName()})
		}
	}
	return out
}

// ServiceAccountRef is a ServiceAccount's namespace and name.
type ServiceAccountRef struct{ Namespace, Name string }

// CanAccess asks the API server (a SubjectAccessReview, as the admin)
// whether ServiceAccount sa may verb Secrets (name, when not empty) in ns.
func CanAccess(ctx context.Context, t *testing.T, c kubernetes.Interface, sa ServiceAccountRef, verb, ns, name string) bool {
	t.Helper()
	review, err := c.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:               "system:serviceaccount:" + sa.Namespace + ":" + sa.Name,
		Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:" + sa.Namespace, "system:authenticated"},
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: verb, Resource: "secrets", Name: name},
	}}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Empty(t, review.Status.EvaluationError, "the review of %v evaluated every binding", sa)
	return review.Status.Allowed
}

// RequireNoJournalSecretAccess: on the real control plane, no keyledger
// ServiceAccount of objs may get, list or watch a Secret of the journal's
// namespace (by name too: the owner's and the CA's Secrets).
func RequireNoJournalSecretAccess(ctx context.Context, t *testing.T, c kubernetes.Interface, objs []*unstructured.Unstructured) {
	t.Helper()
	sas := KeyledgerServiceAccounts(objs)
	require.NotEmpty(t, sas)
	for _, sa := range sas {
		for _, verb := range []string{"get", "list", "watch"} {
			require.False(t, CanAccess(ctx, t, c, sa, verb, JournalNamespace, ""), "%v may %s Secrets of %s", sa, verb, JournalNamespace)
		}
		for _, name := range []string{"keyledger-journal-app", "keyledger-journal-ca", "keyledger-journal-superuser"} {
			require.False(t, CanAccess(ctx, t, c, sa, "get", JournalNamespace, name), "%v may get %s/%s", sa, JournalNamespace, name)
		}
	}
}

// EnsureJournalNamespace creates the journal's namespace on the shared
// control plane once (tests share it; it is never deleted).
func (e *Env) EnsureJournalNamespace(a *Applier) {
	e.T.Helper()
	ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": JournalNamespace}}}
	_, err := a.Apply(e.T.Context(), ns, "", false)
	require.NoError(e.T, err)
}
