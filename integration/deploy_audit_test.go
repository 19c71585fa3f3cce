package integration

import (
	"fmt"
	"net/netip"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/keyledger/keyledger/integration/platform"
	"github.com/keyledger/keyledger/workflow/versioned"
)

// The findings audit reports, one stable word each.
const (
	findingWildcard          = "wildcard"
	findingNoResourceNames   = "no-resource-names"
	findingResourceNames     = "resource-names-not-one"
	findingWriteRight        = "write-right-outside-allowlist"
	findingAutomount         = "automount-not-off"
	findingWritableRoot      = "writable-root-filesystem"
	findingPrivilegeEsc      = "privilege-escalation"
	findingNonRoot           = "run-as-root-allowed"
	findingSeccomp           = "seccomp-missing"
	findingCapabilities      = "capabilities-not-dropped"
	findingMemoryLimit       = "memory-limit-missing"
	findingEgressWide        = "egress-wider-than-host"
	findingEgressTemplate    = "egress-outside-template"
	findingEgressUnfenced    = "pod-not-fenced"
	findingCommandMutable    = "command-configmap-mutable"
	findingCommandMount      = "command-mount-not-subpath-file"
	findingInitMounts        = "init-container-has-mounts"
	findingTokenLifetime     = "token-lifetime"
	findingTokenMount        = "token-mount"
	findingJobRetries        = "job-retries"
	findingADRUser           = "adr-0262-user-not-10001"
	findingADRMemory         = "adr-0262-memory-limit-not-128Mi"
	findingADRDeadline       = "adr-0262-active-deadline"
	findingADRBackoff        = "adr-0262-backoff-limit"
	findingADRToken          = "adr-0262-token"
	commandConfigMapPrefix   = "keyledger-command"
	commandSecretPrefix      = "keyledger-versioned-command" // versioned commands hold values
	controlComponent         = "preflight-control"
	inClusterServiceAccount  = "/var/run/secrets/kubernetes.io/serviceaccount"
	maxTokenExpirationSecond = 600
)

// audit walks rendered objects and returns every violation of the
// deployment's rules, as "finding: where".
func audit(objs []*unstructured.Unstructured) []string {
	a := &auditor{}
	var policies []networkingv1.NetworkPolicy
	var jobs []batchv1.Job
	commandMaps := map[string]bool{} // name -> immutable
	for _, obj := range objs {
		where := obj.GetKind() + "/" + obj.GetName()
		switch obj.GetKind() {
		case "Role", "ClusterRole":
			var r rbacv1.Role // ClusterRole's rules decode the same way
			a.convert(obj, &r)
			a.rules(where, obj.GetKind() == "ClusterRole", r.Rules)
		case "ServiceAccount":
			var sa corev1.ServiceAccount
			a.convert(obj, &sa)
			if sa.AutomountServiceAccountToken == nil || *sa.AutomountServiceAccountToken {
				a.add(findingAutomount, where)
			}
		case "ConfigMap":
			var cm corev1.ConfigMap
			a.convert(obj, &cm)
			if strings.HasPrefix(cm.Name, commandConfigMapPrefix) {
				commandMaps[cm.Name] = cm.Immutable != nil && *cm.Immutable
			}
		case "Secret":
			var sec corev1.Secret
			a.convert(obj, &sec)
			if strings.HasPrefix(sec.Name, commandSecretPrefix) {
				commandMaps[sec.Name] = sec.Immutable != nil && *sec.Immutable
			}
		case "NetworkPolicy":
			var np networkingv1.NetworkPolicy
			a.convert(obj, &np)
			policies = append(policies, np)
			a.egress(where, np)
		case "Job":
			var j batchv1.Job
			a.convert(obj, &j)
			jobs = append(jobs, j)
		case "Pod", "Deployment", "StatefulSet", "DaemonSet", "CronJob", "ReplicaSet":
			a.add("unexpected-workload", where)
		}
	}
	for _, j := range jobs {
		a.job("Job/"+j.Name, j, policies, commandMaps)
	}
	return a.findings
}

type auditor struct{ findings []string }

func (a *auditor) add(finding, where string, detail ...any) {
	a.findings = append(a.findings, strings.TrimSpace(finding+": "+where+" "+fmt.Sprint(detail...)))
}

func (a *auditor) convert(obj *unstructured.Unstructured, into any) {
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, into); err != nil {
		a.add("undecodable", obj.GetKind()+"/"+obj.GetName(), err)
	}
}

// writeVerbs are the verbs that change something.
var writeVerbs = []string{"create", "update", "patch", "delete", "deletecollection", "escalate", "bind", "impersonate", "approve", "sign"}

func (a *auditor) rules(where string, cluster bool, rules []rbacv1.PolicyRule) {
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
					a.add(findingWildcard, at, v)
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
			a.add(findingNoResourceNames, at)
		case keyring && len(r.ResourceNames) != 1:
			a.add(findingResourceNames, at, r.ResourceNames)
		}
		for _, v := range r.Verbs {
			if !slices.Contains(writeVerbs, v) && v != "*" {
				continue
			}
			if accessReview || (keyring && v == "update") {
				continue
			}
			a.add(findingWriteRight, at, v)
		}
	}
}

// commandSource names the command ConfigMap (or, for versioned writes, the
// command Secret) a volume mounts, or "".
func commandSource(v corev1.Volume) string {
	switch {
	case v.ConfigMap != nil && strings.HasPrefix(v.ConfigMap.Name, commandConfigMapPrefix):
		return v.ConfigMap.Name
	case v.Secret != nil && strings.HasPrefix(v.Secret.SecretName, commandSecretPrefix):
		return v.Secret.SecretName
	}
	return ""
}

// The egress rules a policy may hold, each matching one template exactly.
func (a *auditor) egress(where string, np networkingv1.NetworkPolicy) {
	if !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress) {
		a.add(findingEgressTemplate, where, "egress not restricted")
	}
	for i, r := range np.Spec.Egress {
		at := fmt.Sprintf("%s egress %d", where, i)
		if len(r.To) != 1 || len(r.Ports) == 0 {
			a.add(findingEgressTemplate, at, "want exactly one peer and explicit ports")
			continue
		}
		peer := r.To[0]
		switch {
		case peer.IPBlock != nil:
			p, err := netip.ParsePrefix(peer.IPBlock.CIDR)
			if err != nil || p.Bits() != p.Addr().BitLen() || len(peer.IPBlock.Except) != 0 {
				a.add(findingEgressWide, at, peer.IPBlock.CIDR)
			}
			if peer.PodSelector != nil || peer.NamespaceSelector != nil || len(r.Ports) != 1 ||
				!tcpPort(r.Ports[0], -1) {
				a.add(findingEgressTemplate, at, "want one /32 and one TCP port")
			}
		case isDNS(peer):
			for _, p := range r.Ports {
				if p.Port == nil || p.Port.IntValue() != 53 || p.EndPort != nil {
					a.add(findingEgressTemplate, at, "DNS rule beyond port 53")
				}
			}
		case isJournal(peer):
			if len(r.Ports) != 1 || !tcpPort(r.Ports[0], 5432) {
				a.add(findingEgressTemplate, at, "want TCP 5432 to the primary or its pooler")
			}
		default:
			a.add(findingEgressTemplate, at, "peer is not DNS, a CloudNativePG primary or pooler, or one API server address")
		}
	}
}

func tcpPort(p networkingv1.NetworkPolicyPort, want int) bool {
	if p.Protocol == nil || *p.Protocol != corev1.ProtocolTCP || p.Port == nil || p.EndPort != nil {
		return false
	}
	n := p.Port.IntValue()
	return n > 0 && (want < 0 || n == want) && p.Port.String() == fmt.Sprint(n)
}

func isDNS(p networkingv1.NetworkPolicyPeer) bool {
	return p.IPBlock == nil && p.NamespaceSelector != nil && p.PodSelector != nil &&
		len(p.NamespaceSelector.MatchExpressions) == 0 && len(p.PodSelector.MatchExpressions) == 0 &&
		mapsEqual(p.NamespaceSelector.MatchLabels, map[string]string{"kubernetes.io/metadata.name": "kube-system"}) &&
		mapsEqual(p.PodSelector.MatchLabels, map[string]string{"k8s-app": "kube-dns"})
}

// isJournal: a CloudNativePG primary's pods, or one Pooler's pods
// (cnpg.io/poolerName alone: a Pooler's pods carry the Cluster's label too,
// so a selector naming only the Cluster would reach every instance), in the
// policy's namespace (the schema owner's Jobs beside the journal) or in
// exactly one namespace named by its kubernetes.io/metadata.name label (a
// served namespace's Jobs).
func isJournal(p networkingv1.NetworkPolicyPeer) bool {
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

func mapsEqual(a, b map[string]string) bool {
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
	adrUser          = 10001 // runAsUser and runAsGroup (and fsGroup where set)
	adrMemoryLimit   = "128Mi"
	adrDeadline      = 300 // activeDeadlineSeconds
	adrBackoffLimit  = 0
	adrTokenLifetime = 600 // the projected token's expirationSeconds
	// The control Job (component preflight-control) only proves the
	// network gate: no token, no journal, and a shorter deadline of its
	// own, pinned as exactly.
	controlDeadline = 120
)

// jobNumbers is what ADR-0262 pins for one kind of keyledger Job.
type jobNumbers struct {
	deadline, backoff int64
	// token: the pod mounts exactly one projected token, of adrTokenLifetime
	// (a Job that talks to the API server); false: no token at all.
	token bool
}

// numbersFor says what a Job of deploy/ must carry, by its component label.
func numbersFor(j batchv1.Job) jobNumbers {
	switch j.Spec.Template.Labels["app.kubernetes.io/component"] {
	case controlComponent:
		return jobNumbers{deadline: controlDeadline, backoff: adrBackoffLimit}
	case "migrate", "grant", "inspect": // the journal's schema-owner Jobs: PostgreSQL only
		return jobNumbers{deadline: adrDeadline, backoff: adrBackoffLimit}
	default: // retire, versioned: they call the API server
		return jobNumbers{deadline: adrDeadline, backoff: adrBackoffLimit, token: true}
	}
}

// adrNumbers reports every number of j that is not exactly want's (and
// ADR-0262's user and memory limit, which every keyledger Job shares).
func (a *auditor) adrNumbers(where string, j batchv1.Job, want jobNumbers) {
	if j.Spec.ActiveDeadlineSeconds == nil || *j.Spec.ActiveDeadlineSeconds != want.deadline {
		a.add(findingADRDeadline, where, "want ", want.deadline)
	}
	if j.Spec.BackoffLimit == nil || int64(*j.Spec.BackoffLimit) != want.backoff {
		a.add(findingADRBackoff, where, "want ", want.backoff)
	}
	pod := j.Spec.Template.Spec
	is := func(p *int64) bool { return p != nil && *p == adrUser }
	if psc := pod.SecurityContext; psc == nil || !is(psc.RunAsUser) || !is(psc.RunAsGroup) || (psc.FSGroup != nil && !is(psc.FSGroup)) {
		a.add(findingADRUser, where, "pod")
	}
	limit := resource.MustParse(adrMemoryLimit)
	for _, c := range append(slices.Clone(pod.InitContainers), pod.Containers...) {
		if sc := c.SecurityContext; sc != nil && ((sc.RunAsUser != nil && !is(sc.RunAsUser)) || (sc.RunAsGroup != nil && !is(sc.RunAsGroup))) {
			a.add(findingADRUser, where, "container ", c.Name)
		}
		if m, ok := c.Resources.Limits[corev1.ResourceMemory]; !ok || m.Cmp(limit) != 0 {
			a.add(findingADRMemory, where, "container ", c.Name)
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
				if t.ExpirationSeconds == nil || *t.ExpirationSeconds != adrTokenLifetime {
					a.add(findingADRToken, where, "volume ", v.Name, " want expirationSeconds ", adrTokenLifetime)
				}
			}
		}
	}
	if want.token != (tokens == 1) || tokens > 1 {
		a.add(findingADRToken, where, fmt.Sprintf("%d projected tokens, want %d", tokens, map[bool]int{true: 1}[want.token]))
	}
}

func (a *auditor) job(where string, j batchv1.Job, policies []networkingv1.NetworkPolicy, commandMaps map[string]bool) {
	a.adrNumbers(where, j, numbersFor(j))
	if j.Spec.BackoffLimit == nil || *j.Spec.BackoffLimit != 0 || j.Spec.ActiveDeadlineSeconds == nil ||
		*j.Spec.ActiveDeadlineSeconds > 300 || j.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyNever {
		a.add(findingJobRetries, where)
	}
	pod := j.Spec.Template.Spec
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		a.add(findingAutomount, where)
	}
	// Every pod but the control run's is selected by an egress policy.
	if j.Spec.Template.Labels["app.kubernetes.io/component"] != controlComponent {
		fenced := false
		for _, np := range policies {
			sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
			if err == nil && !sel.Empty() && sel.Matches(labels.Set(j.Spec.Template.Labels)) &&
				slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress) {
				fenced = true
			}
		}
		if !fenced {
			a.add(findingEgressUnfenced, where)
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
					if t.ExpirationSeconds == nil || *t.ExpirationSeconds > maxTokenExpirationSecond {
						a.add(findingTokenLifetime, where+" volume "+v.Name)
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
				a.add(findingTokenMount, where+" volume "+v.Name, "want token, ca.crt and namespace, got ", files)
			}
		}
	}
	psc := pod.SecurityContext
	if psc == nil {
		psc = &corev1.PodSecurityContext{}
	}
	for _, c := range pod.InitContainers {
		if len(c.VolumeMounts) != 0 {
			a.add(findingInitMounts, where+" init container "+c.Name)
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
			a.add(findingWritableRoot, at)
		}
		if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || (sc.Privileged != nil && *sc.Privileged) {
			a.add(findingPrivilegeEsc, at)
		}
		nonRoot := (sc.RunAsNonRoot != nil && *sc.RunAsNonRoot) || (sc.RunAsNonRoot == nil && psc.RunAsNonRoot != nil && *psc.RunAsNonRoot)
		if !nonRoot || (sc.RunAsUser != nil && *sc.RunAsUser == 0) || (psc.RunAsUser != nil && *psc.RunAsUser == 0) {
			a.add(findingNonRoot, at)
		}
		seccomp := sc.SeccompProfile
		if seccomp == nil {
			seccomp = psc.SeccompProfile
		}
		if seccomp == nil || seccomp.Type != corev1.SeccompProfileTypeRuntimeDefault {
			a.add(findingSeccomp, at)
		}
		if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) != 0 {
			a.add(findingCapabilities, at)
		}
		if _, ok := c.Resources.Limits[corev1.ResourceMemory]; !ok {
			a.add(findingMemoryLimit, at)
		}
		for _, m := range c.VolumeMounts {
			v := volumes[m.Name]
			if v.Projected != nil && slices.ContainsFunc(v.Projected.Sources, func(s corev1.VolumeProjection) bool { return s.ServiceAccountToken != nil }) {
				tokenMounts++
				if m.MountPath != inClusterServiceAccount || !m.ReadOnly {
					a.add(findingTokenMount, at, m.MountPath)
				}
			}
			source := commandSource(v)
			if source == "" {
				continue
			}
			immutable, known := commandMaps[source]
			if !known || !immutable {
				a.add(findingCommandMutable, at, source)
			}
			// The command is one regular file: a subPath mount, read-only, at
			// the absolute path `keyledger run` is given.
			if m.SubPath == "" || !m.ReadOnly || !path.IsAbs(m.MountPath) || path.Base(m.MountPath) != path.Base(m.SubPath) ||
				!slices.Contains(c.Args, m.MountPath) {
				a.add(findingCommandMount, at, m.MountPath)
			}
		}
		if len(c.Args) > 0 && c.Args[0] == "run" && !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
			return commandSource(volumes[m.Name]) != "" && m.MountPath == c.Args[len(c.Args)-1]
		}) {
			a.add(findingCommandMount, at, "run's command file is not a command ConfigMap or Secret mount")
		}
	}
	if tokenMounts > 1 {
		a.add(findingTokenMount, where, "more than one container mounts a token")
	}
}

// Every kustomization, and a private overlay filled as deploy/README.md
// says, passes the audit.
func TestIntegrationDeployAudit(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("integration test")
	}
	fsys := deployFS(t)
	components := map[string]bool{} // the Jobs whose ADR-0262 numbers were checked
	for _, dir := range kustomizations {
		objs := render(t, fsys, "/deploy/"+dir)
		if findings := audit(objs); len(findings) > 0 {
			t.Errorf("%s: %v", dir, findings) // every directory's findings, not only the first's
		}
		for _, o := range objs {
			if o.GetKind() == "Job" {
				c, _, _ := unstructured.NestedString(o.Object, "spec", "template", "metadata", "labels", "app.kubernetes.io/component")
				components[c] = true
			}
		}
	}
	for _, c := range []string{"retire", "versioned", controlComponent, "migrate", "grant"} {
		require.True(t, components[c], "no %s Job was audited (got %v)", c, components)
	}
	require.Empty(t, audit(renderPrivate(t, validPrivateOverlay())), "private overlay")
}

func validPrivateOverlay() privateOverlay {
	return privateOverlay{Namespace: "team-a", NameSuffix: "audit", SecretName: "keyring", Canary: "192.0.2.10:443",
		Command: []byte(`{"kind":"KeyRetirement"}`), APIServerIP: "10.0.0.1", APIServerPort: 6443}
}

// The audit can fail: each mutation of the rendered objects (or of the
// private overlay an operator writes) is reported with its finding.
func TestIntegrationDeployAuditCatchesMutations(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("integration test")
	}
	base := renderPrivate(t, validPrivateOverlay())
	require.Empty(t, audit(base))
	set := func(kind, prefix string, value any, fields ...string) func(t *testing.T, objs []*unstructured.Unstructured) {
		return func(t *testing.T, objs []*unstructured.Unstructured) {
			require.NoError(t, unstructured.SetNestedField(find(t, objs, kind, prefix).Object, value, fields...))
		}
	}
	ruleOf := func(kind, prefix string, mutate func(r map[string]any)) func(t *testing.T, objs []*unstructured.Unstructured) {
		return func(t *testing.T, objs []*unstructured.Unstructured) {
			role := find(t, objs, kind, prefix)
			rules, _, _ := unstructured.NestedSlice(role.Object, "rules")
			mutate(rules[0].(map[string]any))
			require.NoError(t, unstructured.SetNestedSlice(role.Object, rules, "rules"))
		}
	}
	rule := func(mutate func(r map[string]any)) func(t *testing.T, objs []*unstructured.Unstructured) {
		return ruleOf("Role", "keyledger-retire", mutate)
	}
	container := func(init bool, mutate func(c map[string]any)) func(t *testing.T, objs []*unstructured.Unstructured) {
		return func(t *testing.T, objs []*unstructured.Unstructured) {
			job := find(t, objs, "Job", "keyledger-retire")
			field := "containers"
			if init {
				field = "initContainers"
			}
			cs, _, _ := unstructured.NestedSlice(job.Object, "spec", "template", "spec", field)
			mutate(cs[0].(map[string]any))
			require.NoError(t, unstructured.SetNestedSlice(job.Object, cs, "spec", "template", "spec", field))
		}
	}
	egressRule := func(rule map[string]any) func(t *testing.T, objs []*unstructured.Unstructured) {
		return func(t *testing.T, objs []*unstructured.Unstructured) {
			np := find(t, objs, "NetworkPolicy", "keyledger-retire")
			egress, _, _ := unstructured.NestedSlice(np.Object, "spec", "egress")
			require.NoError(t, unstructured.SetNestedSlice(np.Object, append(egress, rule), "spec", "egress"))
		}
	}
	tcp := func(port int64) []any { return []any{map[string]any{"protocol": "TCP", "port": port}} }
	cases := []struct {
		name    string
		mutate  func(t *testing.T, objs []*unstructured.Unstructured)
		finding string
	}{
		{"wildcard-verb", rule(func(r map[string]any) { r["verbs"] = []any{"*"} }), findingWildcard},
		{"wildcard-resource", rule(func(r map[string]any) { r["resources"] = []any{"*"} }), findingWildcard},
		{"role-without-resource-names", rule(func(r map[string]any) { delete(r, "resourceNames") }), findingNoResourceNames},
		{"second-secret-name", rule(func(r map[string]any) {
			r["resourceNames"] = append(r["resourceNames"].([]any), "other-keyring")
		}), findingResourceNames},
		{"patch-verb", rule(func(r map[string]any) { r["verbs"] = append(r["verbs"].([]any), "patch") }), findingWriteRight},
		{"cluster-role-widened", ruleOf("ClusterRole", "keyledger-access-review", func(r map[string]any) {
			r["resources"] = append(r["resources"].([]any), "subjectaccessreviews")
		}), findingWriteRight},
		{"service-account-automount", set("ServiceAccount", "keyledger-retire", true, "automountServiceAccountToken"), findingAutomount},
		{"service-account-automount-unset", func(t *testing.T, objs []*unstructured.Unstructured) {
			unstructured.RemoveNestedField(find(t, objs, "ServiceAccount", "keyledger-retire").Object, "automountServiceAccountToken")
		}, findingAutomount},
		{"pod-automount", set("Job", "keyledger-retire", true, "spec", "template", "spec", "automountServiceAccountToken"), findingAutomount},
		{"writable-root", container(false, func(c map[string]any) {
			c["securityContext"].(map[string]any)["readOnlyRootFilesystem"] = false
		}), findingWritableRoot},
		{"init-writable-root", container(true, func(c map[string]any) {
			delete(c["securityContext"].(map[string]any), "readOnlyRootFilesystem")
		}), findingWritableRoot},
		{"seccomp-missing", func(t *testing.T, objs []*unstructured.Unstructured) {
			job := find(t, objs, "Job", "keyledger-retire")
			unstructured.RemoveNestedField(job.Object, "spec", "template", "spec", "securityContext", "seccompProfile")
			container(false, func(c map[string]any) { delete(c["securityContext"].(map[string]any), "seccompProfile") })(t, objs)
		}, findingSeccomp},
		{"capabilities-kept", container(false, func(c map[string]any) {
			delete(c["securityContext"].(map[string]any), "capabilities")
		}), findingCapabilities},
		{"capability-added", container(true, func(c map[string]any) {
			c["securityContext"].(map[string]any)["capabilities"] = map[string]any{"drop": []any{"ALL"}, "add": []any{"NET_RAW"}}
		}), findingCapabilities},
		{"egress-wide-cidr", egressRule(map[string]any{"to": []any{map[string]any{"ipBlock": map[string]any{"cidr": "10.0.0.0/24"}}}, "ports": tcp(443)}), findingEgressWide},
		{"egress-everywhere", egressRule(map[string]any{"to": []any{map[string]any{"ipBlock": map[string]any{"cidr": "0.0.0.0/0"}}}, "ports": tcp(443)}), findingEgressWide},
		{"egress-namespace-wide", egressRule(map[string]any{"to": []any{map[string]any{"podSelector": map[string]any{}}}, "ports": tcp(5432)}), findingEgressTemplate},
		{"egress-any-port", egressRule(map[string]any{"to": []any{map[string]any{"ipBlock": map[string]any{"cidr": "10.0.0.2/32"}}}}), findingEgressTemplate},
		{"egress-replica", egressRule(map[string]any{"to": []any{map[string]any{"podSelector": map[string]any{"matchLabels": map[string]any{
			"cnpg.io/cluster": "keyledger-journal", "cnpg.io/instanceRole": "replica"}}}}, "ports": tcp(5432)}), findingEgressTemplate},
		{"egress-every-instance", egressRule(map[string]any{"to": []any{map[string]any{"podSelector": map[string]any{"matchLabels": map[string]any{
			"cnpg.io/cluster": "keyledger-journal"}}}}, "ports": tcp(5432)}), findingEgressTemplate},
		{"egress-pooler-and-instances", egressRule(map[string]any{"to": []any{map[string]any{"podSelector": map[string]any{"matchLabels": map[string]any{
			"cnpg.io/cluster": "keyledger-journal", "cnpg.io/poolerName": "keyledger-journal-pooler"}}}}, "ports": tcp(5432)}), findingEgressTemplate},
		{"egress-pooler-any-port", egressRule(map[string]any{"to": []any{map[string]any{"podSelector": map[string]any{"matchLabels": map[string]any{
			"cnpg.io/poolerName": "keyledger-journal-pooler"}}}}, "ports": tcp(9127)}), findingEgressTemplate},
		{"egress-unrestricted", set("NetworkPolicy", "keyledger-retire", []any{"Ingress"}, "spec", "policyTypes"), findingEgressUnfenced},
		{"command-mutable", set("ConfigMap", commandConfigMapPrefix, false, "immutable"), findingCommandMutable},
		{"command-directory-mount", container(false, func(c map[string]any) {
			m := c["volumeMounts"].([]any)[0].(map[string]any)
			delete(m, "subPath")
			m["mountPath"] = "/etc/keyledger"
		}), findingCommandMount},
		{"command-mount-writable", container(false, func(c map[string]any) {
			c["volumeMounts"].([]any)[0].(map[string]any)["readOnly"] = false
		}), findingCommandMount},
		{"init-mounts-token", container(true, func(c map[string]any) {
			c["volumeMounts"] = []any{map[string]any{"name": "kube-api-access", "mountPath": inClusterServiceAccount, "readOnly": true}}
		}), findingInitMounts},
		{"long-token", func(t *testing.T, objs []*unstructured.Unstructured) {
			job := find(t, objs, "Job", "keyledger-retire")
			vols, _, _ := unstructured.NestedSlice(job.Object, "spec", "template", "spec", "volumes")
			for _, v := range vols {
				if src, ok, _ := unstructured.NestedSlice(v.(map[string]any), "projected", "sources"); ok {
					src[0].(map[string]any)["serviceAccountToken"].(map[string]any)["expirationSeconds"] = int64(3600)
					require.NoError(t, unstructured.SetNestedSlice(v.(map[string]any), src, "projected", "sources"))
				}
			}
			require.NoError(t, unstructured.SetNestedSlice(job.Object, vols, "spec", "template", "spec", "volumes"))
		}, findingTokenLifetime},
		{"token-without-ca", func(t *testing.T, objs []*unstructured.Unstructured) {
			job := find(t, objs, "Job", "keyledger-retire")
			vols, _, _ := unstructured.NestedSlice(job.Object, "spec", "template", "spec", "volumes")
			for _, v := range vols {
				if src, ok, _ := unstructured.NestedSlice(v.(map[string]any), "projected", "sources"); ok {
					require.NoError(t, unstructured.SetNestedSlice(v.(map[string]any), []any{src[0], src[2]}, "projected", "sources"))
				}
			}
			require.NoError(t, unstructured.SetNestedSlice(job.Object, vols, "spec", "template", "spec", "volumes"))
		}, findingTokenMount},
		{"token-mounted-elsewhere", container(false, func(c map[string]any) {
			c["volumeMounts"].([]any)[1].(map[string]any)["mountPath"] = "/token"
		}), findingTokenMount},
		{"job-retries", set("Job", "keyledger-retire", int64(3), "spec", "backoffLimit"), findingJobRetries},
		// ADR-0262's numbers, exactly: a drift that the bounds above
		// accept (a shorter deadline, a different memory limit) fails too.
		{"adr-backoff", set("Job", "keyledger-retire", int64(1), "spec", "backoffLimit"), findingADRBackoff},
		{"adr-deadline-shorter", set("Job", "keyledger-retire", int64(240), "spec", "activeDeadlineSeconds"), findingADRDeadline},
		{"adr-deadline-longer", set("Job", "keyledger-retire", int64(600), "spec", "activeDeadlineSeconds"), findingADRDeadline},
		{"adr-deadline-missing", func(t *testing.T, objs []*unstructured.Unstructured) {
			unstructured.RemoveNestedField(find(t, objs, "Job", "keyledger-retire").Object, "spec", "activeDeadlineSeconds")
		}, findingADRDeadline},
		{"adr-pod-user", set("Job", "keyledger-retire", int64(10002), "spec", "template", "spec", "securityContext", "runAsUser"), findingADRUser},
		{"adr-pod-group", set("Job", "keyledger-retire", int64(0), "spec", "template", "spec", "securityContext", "runAsGroup"), findingADRUser},
		{"adr-fs-group", set("Job", "keyledger-retire", int64(2000), "spec", "template", "spec", "securityContext", "fsGroup"), findingADRUser},
		{"adr-container-user", container(false, func(c map[string]any) {
			c["securityContext"].(map[string]any)["runAsUser"] = int64(10002)
		}), findingADRUser},
		{"adr-init-group", container(true, func(c map[string]any) {
			c["securityContext"].(map[string]any)["runAsGroup"] = int64(10)
		}), findingADRUser},
		{"adr-memory-larger", container(false, func(c map[string]any) {
			c["resources"].(map[string]any)["limits"] = map[string]any{"memory": "256Mi"}
		}), findingADRMemory},
		{"adr-memory-smaller", container(true, func(c map[string]any) {
			c["resources"].(map[string]any)["limits"] = map[string]any{"memory": "64Mi"}
		}), findingADRMemory},
		{"adr-token-shorter", func(t *testing.T, objs []*unstructured.Unstructured) {
			job := find(t, objs, "Job", "keyledger-retire")
			vols, _, _ := unstructured.NestedSlice(job.Object, "spec", "template", "spec", "volumes")
			for _, v := range vols {
				if src, ok, _ := unstructured.NestedSlice(v.(map[string]any), "projected", "sources"); ok {
					src[0].(map[string]any)["serviceAccountToken"].(map[string]any)["expirationSeconds"] = int64(599)
					require.NoError(t, unstructured.SetNestedSlice(v.(map[string]any), src, "projected", "sources"))
				}
			}
			require.NoError(t, unstructured.SetNestedSlice(job.Object, vols, "spec", "template", "spec", "volumes"))
		}, findingADRToken},
		{"memory-unlimited", container(false, func(c map[string]any) { delete(c["resources"].(map[string]any), "limits") }), findingMemoryLimit},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			objs := make([]*unstructured.Unstructured, len(base))
			for i, o := range base {
				objs[i] = o.DeepCopy()
			}
			tc.mutate(t, objs)
			findings := audit(objs)
			require.NotEmpty(t, findings, "the audit must fail")
			want := tc.finding
			require.True(t, slices.ContainsFunc(findings, func(f string) bool { return strings.HasPrefix(f, want+":") }),
				"want %s among %v", want, findings)
		})
	}
	// An operator's overlay that replaces the command without repeating
	// the immutable option renders a mutable ConfigMap: caught.
	forgot := validPrivateOverlay()
	forgot.ForgetImmutable = true
	findings := audit(renderPrivate(t, forgot))
	require.True(t, slices.ContainsFunc(findings, func(f string) bool { return strings.HasPrefix(f, findingCommandMutable+":") }), "%v", findings)
}

// The rendered credentials hook's Job carries ADR-0262's numbers where they
// apply: UID/GID 10001, a 128Mi limit, activeDeadlineSeconds 300. Where it
// differs, the difference is pinned as exactly: backoffLimit 2 (a hook is
// desired state: Argo CD's retried pod resumes the same run, where a
// one-shot Job's rerun is the operator's decision). Like the deploy Jobs it
// mounts no automounted token, only one projected token of 600 s. The Job
// is read from the render golden file, which TestRenderCredentialsGolden
// proves is what `keyledger render credentials` writes.
func TestIntegrationDeployAuditCredentialsHookNumbers(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("integration test")
	}
	raw, err := os.ReadFile(filepath.Join(platform.RepoRoot(), "cmd", "keyledger", "app", "testdata", "render-credentials.golden.yaml"))
	require.NoError(t, err)
	var job batchv1.Job
	for _, doc := range strings.Split(string(raw), "\n---\n") {
		if strings.Contains(doc, "\nkind: Job\n") {
			require.NoError(t, yaml.UnmarshalStrict([]byte(doc), &job))
		}
	}
	require.NotEmpty(t, job.Name, "the golden file holds the hook Job")
	hook := jobNumbers{deadline: adrDeadline, backoff: 2, token: true}
	a := &auditor{}
	a.adrNumbers("Job/"+job.Name, job, hook)
	require.Empty(t, a.findings)
	require.NotNil(t, job.Spec.Template.Spec.AutomountServiceAccountToken, "the hook pod says whether the token is automounted")
	require.False(t, *job.Spec.Template.Spec.AutomountServiceAccountToken, "the hook pod's only token is the projected one")

	for name, mutate := range map[string]func(j *batchv1.Job){
		"no-deadline":  func(j *batchv1.Job) { j.Spec.ActiveDeadlineSeconds = nil },
		"more-retries": func(j *batchv1.Job) { three := int32(3); j.Spec.BackoffLimit = &three },
		"root-group":   func(j *batchv1.Job) { root := int64(0); j.Spec.Template.Spec.SecurityContext.RunAsGroup = &root },
		"memory-256Mi": func(j *batchv1.Job) {
			j.Spec.Template.Spec.Containers[0].Resources.Limits[corev1.ResourceMemory] = resource.MustParse("256Mi")
		},
		"memory-absent": func(j *batchv1.Job) { j.Spec.Template.Spec.Containers[0].Resources.Limits = nil },
		"token-hour": func(j *batchv1.Job) {
			for _, v := range j.Spec.Template.Spec.Volumes {
				if v.Projected != nil {
					for _, src := range v.Projected.Sources {
						if src.ServiceAccountToken != nil {
							hour := int64(3600)
							src.ServiceAccountToken.ExpirationSeconds = &hour
						}
					}
				}
			}
		},
		"token-absent": func(j *batchv1.Job) {
			j.Spec.Template.Spec.Volumes = slices.DeleteFunc(j.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool { return v.Projected != nil })
		},
	} {
		j := job.DeepCopy()
		mutate(j)
		a := &auditor{}
		a.adrNumbers("Job/"+j.Name, *j, hook)
		require.NotEmpty(t, a.findings, name)
	}
}
