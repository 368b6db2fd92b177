package schedule

import (
	"testing"

	"github.com/rota-dev/rota/test/integration/framework"
)

// TestManifestsAreAccepted creates every object of manifests/schedule-controller
// in a real API server with strict field validation.
func TestManifestsAreAccepted(t *testing.T) {
	cp := framework.StartControlPlane(t)
	cp.Create(t, framework.Namespace("rota-system"))
	created := 0
	for _, m := range framework.Manifests(t, framework.ManifestDir(t, "manifests/schedule-controller")...) {
		if _, err := cp.CreateManifest(t, m.Object); err != nil {
			t.Errorf("%s: creating %s %s: %v", m.File, m.Object.GetKind(), m.Object.GetName(), err)
			continue
		}
		created++
	}
	if created != 27 {
		t.Errorf("created %d objects, want 27 (ServiceAccount, ClusterRole(+Binding), the tenants' aggregated ClusterRoles (2), the system:auth-delegator binding, Role(+Binding), "+
			"ConfigMap, Deployment, ValidatingAdmissionPolicies rota-schedule-controller-writes and -events, rota-deployschedule-namespaces and -owner (+Bindings), "+
			"the target webhook's Service and ValidatingWebhookConfiguration, and webhook-certs' ServiceAccount, Role(+Binding), ClusterRole(+Binding), Job and CronJob)", created)
	}
}
