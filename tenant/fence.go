package tenant

import (
	"context"
	"net/netip"
	"reflect"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// APIEndpoint is one address and port the API server serves on.
type APIEndpoint struct {
	Addr netip.Addr
	Port int32
}

// apiEndpoints reads the API server's endpoints from the EndpointSlices of
// the kubernetes Service in default: every ready address with every TCP
// port, in a stable order.
func apiEndpoints(ctx context.Context, a *Admin) ([]APIEndpoint, error) {
	list, err := a.Dynamic.Resource(sliceKind.GVR).Namespace(metav1.NamespaceDefault).List(ctx,
		metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=kubernetes"})
	if err != nil {
		return nil, apiError("reading the kubernetes Service's EndpointSlices", err)
	}
	var out []APIEndpoint
	for _, u := range list.Items {
		var s discoveryv1.EndpointSlice
		if err := fromUnstructured(u.Object, &s); err != nil {
			return nil, err
		}
		out = append(out, sliceEndpoints(&s)...)
	}
	slices.SortFunc(out, func(x, y APIEndpoint) int {
		if c := x.Addr.Compare(y.Addr); c != 0 {
			return c
		}
		return int(x.Port - y.Port)
	})
	out = slices.Compact(out)
	if len(out) == 0 {
		return nil, unavailable(ReasonAPIEndpointMissing,
			"check that the API server publishes its address (kubectl get endpointslices -n default -l kubernetes.io/service-name=kubernetes), then run the same command again",
			"the kubernetes Service of default lists no ready endpoint")
	}
	return out, nil
}

func sliceEndpoints(s *discoveryv1.EndpointSlice) []APIEndpoint {
	var out []APIEndpoint
	for _, e := range s.Endpoints {
		if e.Conditions.Ready != nil && !*e.Conditions.Ready {
			continue
		}
		for _, addr := range e.Addresses {
			ip, err := netip.ParseAddr(addr)
			if err != nil {
				continue
			}
			for _, p := range s.Ports {
				if p.Port != nil && (p.Protocol == nil || *p.Protocol == corev1.ProtocolTCP) {
					out = append(out, APIEndpoint{Addr: ip, Port: *p.Port})
				}
			}
		}
	}
	return out
}

// fence is deploy/credentials' NetworkPolicy with the API server egress
// of components/api-egress filled in: one rule per endpoint, its address
// as a /32 (or /128) and its TCP port. A unit test holds the rest equal to
// deploy/credentials/networkpolicy.yaml.
func fence(api []APIEndpoint) *networkingv1.NetworkPolicy {
	tcp, udp := corev1.ProtocolTCP, corev1.ProtocolUDP
	port := func(p corev1.Protocol, n int32) networkingv1.NetworkPolicyPort {
		v := intstr.FromInt32(n)
		return networkingv1.NetworkPolicyPort{Protocol: &p, Port: &v}
	}
	peer := func(ns string, pods map[string]string) networkingv1.NetworkPolicyPeer {
		return networkingv1.NetworkPolicyPeer{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
			PodSelector:       &metav1.LabelSelector{MatchLabels: pods}}
	}
	p := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Labels: labels(nil)},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{
				"app.kubernetes.io/managed-by": "keyledger", "app.kubernetes.io/component": "credentials"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
			Ingress:     []networkingv1.NetworkPolicyIngressRule{},
			Egress: []networkingv1.NetworkPolicyEgressRule{
				{To: []networkingv1.NetworkPolicyPeer{peer("kube-system", map[string]string{"k8s-app": "kube-dns"})},
					Ports: []networkingv1.NetworkPolicyPort{port(udp, 53), port(tcp, 53)}},
				{To: []networkingv1.NetworkPolicyPeer{peer(JournalNamespace, map[string]string{
					"cnpg.io/cluster": JournalCluster, "cnpg.io/instanceRole": "primary"})},
					Ports: []networkingv1.NetworkPolicyPort{port(tcp, 5432)}},
			},
		},
	}
	for _, e := range api {
		p.Spec.Egress = append(p.Spec.Egress, networkingv1.NetworkPolicyEgressRule{
			To:    []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: netip.PrefixFrom(e.Addr, e.Addr.BitLen()).String()}}},
			Ports: []networkingv1.NetworkPolicyPort{port(tcp, e.Port)}})
	}
	return p
}

// ensureFence makes the namespace's credentials fence the one fence gives.
func ensureFence(ctx context.Context, a *Admin, n Names) (Change, error) {
	api, err := apiEndpoints(ctx, a)
	if err != nil {
		return Change{}, err
	}
	want := fence(api)
	return ensure(ctx, a, policyKind, n.Namespace, FencePolicy, func(live *networkingv1.NetworkPolicy) (*networkingv1.NetworkPolicy, error) {
		if live == nil {
			return want, nil
		}
		if samePolicy(live, want) {
			return nil, nil
		}
		live.Spec, live.Labels = want.Spec, mergeLabels(live.Labels, want.Labels)
		return live, nil
	})
}

// samePolicy compares specs as the API server stores them (an empty
// ingress list comes back absent) and want's labels.
func samePolicy(live, want *networkingv1.NetworkPolicy) bool {
	l, w := live.Spec.DeepCopy(), want.Spec.DeepCopy()
	if len(l.Ingress) == 0 && len(w.Ingress) == 0 {
		l.Ingress, w.Ingress = nil, nil
	}
	for k, v := range want.Labels {
		if live.Labels[k] != v {
			return false
		}
	}
	return reflect.DeepEqual(l, w)
}

// ensureCA copies ca.crt, and only it, of the CA Secret of the journal
// into the ConfigMap of n's namespace: created, refreshed when
// CloudNativePG rotated its CA, or unchanged.
func ensureCA(ctx context.Context, a *Admin, n Names) (Change, error) {
	ca, found, err := get[corev1.Secret](ctx, a, secretKind, JournalNamespace, CASecret)
	if err != nil {
		return Change{}, err
	}
	if !found || len(ca.Data["ca.crt"]) == 0 {
		return Change{}, unavailable(ReasonJournalCAMissing,
			"wait until the Cluster is ready (CloudNativePG writes its CA Secret), then run the same command again",
			"the journal's CA Secret %s/%s does not exist or holds no ca.crt", JournalNamespace, CASecret)
	}
	crt := string(ca.Data["ca.crt"])
	return ensure(ctx, a, configMapKind, n.Namespace, CAConfigMap, func(live *corev1.ConfigMap) (*corev1.ConfigMap, error) {
		want := map[string]string{"ca.crt": crt}
		if live == nil {
			return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Labels: labels(nil)}, Data: want}, nil
		}
		if reflect.DeepEqual(live.Data, want) && len(live.BinaryData) == 0 {
			return nil, nil
		}
		live.Data, live.BinaryData = want, nil
		return live, nil
	})
}
