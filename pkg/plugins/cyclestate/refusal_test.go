package cyclestate

import (
	"testing"

	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/rota-dev/rota/pkg/waits"
)

// A refusal is found for the plugin and node that recorded it, or for any
// node when PreFilter recorded it; never for another plugin or node.
func TestRefusalOf(t *testing.T) {
	cs := framework.NewCycleState()
	st := Refuse(cs, "Quota", "n1", fwk.UnschedulableAndUnresolvable, "QuotaExceeded: ",
		waits.Refusal{Reason: waits.QuotaExceeded, Message: "on node n1 the claim would be granted 2 H100"})
	if st.Code() != fwk.UnschedulableAndUnresolvable || st.Message() != "QuotaExceeded: on node n1 the claim would be granted 2 H100" {
		t.Errorf("status = %v %q", st.Code(), st.Message())
	}
	Refuse(cs, "Gang", "", fwk.Unschedulable, "", waits.Refusal{Reason: waits.GangIncomplete, Message: "gang g has 1 of 2 members"})

	for _, tc := range []struct {
		plugin, node string
		want         waits.Reason
	}{
		{"Quota", "n1", waits.QuotaExceeded},
		{"Quota", "n2", ""},
		{"Reservation", "n1", ""},
		{"Gang", "n1", waits.GangIncomplete},
		{"Gang", "n7", waits.GangIncomplete},
	} {
		r, ok := RefusalOf(cs, tc.plugin, tc.node)
		if ok != (tc.want != "") || r.Reason != tc.want {
			t.Errorf("RefusalOf(%s, %s) = %+v, %v; want reason %q", tc.plugin, tc.node, r, ok, tc.want)
		}
	}
}
