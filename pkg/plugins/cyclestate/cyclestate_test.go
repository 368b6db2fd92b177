package cyclestate

import (
	"strings"
	"testing"

	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

type mine struct{ n int }

func (m *mine) Clone() fwk.StateData { return m }

type other struct{}

func (o *other) Clone() fwk.StateData { return o }

func TestRead(t *testing.T) {
	cs := framework.NewCycleState()
	cs.Write("mine", &mine{n: 7})
	cs.Write("other", &other{})
	if got, err := Read[*mine](cs, "mine"); err != nil || got.n != 7 {
		t.Errorf("Read(mine) = %v, %v; want n=7", got, err)
	}
	if _, err := Read[*mine](cs, "missing"); err == nil || !strings.Contains(err.Error(), `reading "missing"`) {
		t.Errorf("missing key: error %v", err)
	}
	if _, err := Read[*mine](cs, "other"); err == nil || !strings.Contains(err.Error(), "has type *cyclestate.other, want *cyclestate.mine") {
		t.Errorf("wrong type: error %v", err)
	}
}
