package framework

import "testing"

// InstallAdmissionPolicies creates every object shipped in
// manifests/admission: the policies, their bindings and the cluster admin's
// parameter object (see ApplyManifests).
func (cp *ControlPlane) InstallAdmissionPolicies(t testing.TB) {
	t.Helper()
	cp.ApplyManifests(t, ManifestDir(t, "manifests/admission")...)
}
