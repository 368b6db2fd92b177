package controlplane

import (
	"k8s.io/kubernetes/test/utils/ktesting"
)

// StartWithFlags is StartWith with extra kube-apiserver flags, such as
// "--authorization-mode=RBAC". They come after the flags every control plane
// sets, so a repeated flag overrides. The clients in the returned
// ControlPlane stay the apiserver's loopback identity (group system:masters),
// whatever the authorization mode. A --disable-admission-plugins among them
// replaces the default one.
func StartWithFlags(t ktesting.TB, dir string, apiserverFlags ...string) (*ControlPlane, error) {
	return startWith(t, dir, false, apiserverFlags...)
}
