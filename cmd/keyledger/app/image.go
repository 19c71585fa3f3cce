package app

import (
	"regexp"
	"strings"
)

// imageDigest is a digest an image reference may end with (@sha256:...):
// the reference then names exactly one image, whatever its tag says later.
var imageDigest = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// checkImage refuses an image reference the kubelet could not pull: empty,
// with white space, or with a digest that is not sha256 and 64 hex digits.
// A tag (name:tag) and a digest (name@sha256:..., or name:tag@sha256:...)
// are both accepted; the hook Job's name hashes the whole reference.
func checkImage(image string) error {
	name, digest, pinned := strings.Cut(image, "@")
	switch {
	case name == "" || strings.ContainsAny(image, " \t\r\n"):
		return usagef("render credentials needs --image IMAGE (no white space; the default is the versions table's)")
	case pinned && !imageDigest.MatchString(digest):
		return usagef("--image: the digest after @ must be sha256: and 64 lowercase hex digits")
	}
	return nil
}
