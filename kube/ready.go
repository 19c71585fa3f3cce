package kube

import (
	"context"
	"errors"

	"k8s.io/client-go/rest"
)

// errNotReady is what NotReady returns: it names no address and carries
// nothing of the API server's answer.
var errNotReady = errors.New("the API server answered that it is not ready (/readyz)")

// NotReady asks the API server whether it is ready to serve (GET /readyz,
// which every identity may read). A server that has just started may deny
// what its authorizer will allow once its caches are synced: a permission
// check that fails then proves nothing about the identity's rights. It
// returns a server error (5xx, which a rerun settles) only when the server
// answers that it is not ready; any other answer, or none, is nil, so a
// real permission mismatch is never hidden behind it.
func NotReady(ctx context.Context, client Interface) error {
	rc := client.CoreREST()
	if c, ok := rc.(*rest.RESTClient); rc == nil || ok && c == nil {
		return nil // a fake clientset's (tests): no server to ask
	}
	err := rc.Get().AbsPath("/readyz").Do(ctx).Error()
	if err == nil {
		return nil
	}
	if f := Classify(err); f.Reason == ReasonServerError && f.Code >= 500 {
		return &Error{Failure: f, Err: errNotReady}
	}
	return nil
}
