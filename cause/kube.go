package cause

import "github.com/keyledger/keyledger/kube"

// kubernetes holds the Causes of the API server's failures, by reason.
var kubernetes = map[string]Cause{}

// kubeOrder lists them in the order docs/failures.md gives them.
var kubeOrder []string

const kubeRerun = "run the same command again once the API server answers"

func init() {
	add := func(reason string, settles, permission bool, fix string) {
		kubernetes[reason] = Cause{Dependency: Kubernetes, Reason: reason, Fix: fix, Settles: settles, Permission: permission}
		kubeOrder = append(kubeOrder, reason)
	}
	add("kubernetes-connection-refused", true, false, "nothing listens at the API server's address: check the cluster and the kubeconfig's server, then "+kubeRerun)
	add("kubernetes-connection-lost", true, false, "the connection to the API server was reset: "+kubeRerun)
	add("kubernetes-timeout", true, false, "the API server did not answer in time: check the network path and its load, then "+kubeRerun)
	add("kubernetes-dns", true, false, "the API server's host name does not resolve: check the kubeconfig's server and the DNS, then "+kubeRerun)
	add("kubernetes-tls", false, false, "the API server's certificate does not verify against the kubeconfig's CA (or names another host): correct certificate-authority or server in the kubeconfig"+cannotRerun)
	add("kubernetes-unreachable", true, false, "the API server could not be reached: "+kubeRerun)
	add("kubernetes-unauthorized", false, false, "the API server rejected the credentials (401: an expired, revoked or unknown token or certificate): give the identity a valid token (a fresh kubeconfig, a projected ServiceAccount token)"+cannotRerun)
	add("kubernetes-forbidden", false, true, "the API server forbade a request the permission check had allowed (403: the rights changed during the run, or an admission policy refused): restore exactly the rights the operation needs (docs/reference.md, Using it)"+cannotRerun)
	add("kubernetes-throttled", true, false, "the API server is throttling requests (429): "+kubeRerun)
	add("kubernetes-server-error", true, false, "the API server failed the request (5xx): "+kubeRerun)
}

// ofKube reads a failed API call by its Failure.
func ofKube(e *kube.Error) (Cause, bool) {
	switch e.Failure.Reason {
	case kube.ReasonLost:
		switch kube.LostClass(e.Err) {
		case kube.LostRefused:
			return kubernetes["kubernetes-connection-refused"], true
		case kube.LostReset:
			return kubernetes["kubernetes-connection-lost"], true
		case kube.LostTimeout:
			return kubernetes["kubernetes-timeout"], true
		case kube.LostDNS:
			return kubernetes["kubernetes-dns"], true
		case kube.LostTLS:
			return kubernetes["kubernetes-tls"], true
		case kube.LostOther:
			return kubernetes["kubernetes-unreachable"], true
		}
		// Canceled, or the credentials cleared at exit: keyledger's own
		// doing, not the API server's.
		return Cause{}, false
	case kube.ReasonUnauthorized:
		return kubernetes["kubernetes-unauthorized"], true
	case kube.ReasonForbidden:
		return kubernetes["kubernetes-forbidden"], true
	case kube.ReasonThrottled:
		return kubernetes["kubernetes-throttled"], true
	case kube.ReasonServerError:
		return kubernetes["kubernetes-server-error"], true
	}
	return Cause{}, false
}
