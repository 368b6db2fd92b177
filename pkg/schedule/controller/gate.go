package controller

import (
	"context"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
)

// Gate is the cluster-wide switch of docs/schedule.md ("A pass", step 2).
type Gate string

// Gate values. GateUnreadable is reported when the ConfigMap is missing, cannot
// be read or holds another value; it acts as off (fail closed).
const (
	GateOff        Gate = "off"
	GateObserve    Gate = "observe"
	GateOn         Gate = "on"
	GateUnreadable Gate = "unreadable"
)

// GateKey is the ConfigMap data key holding the switch.
const GateKey = "mode"

// gateState is what the gate step decides for one pass.
type gateState struct {
	gate Gate
	// observe: status only (the schedule's Observe mode or the observe gate).
	observe bool
	// enforce: the gate is on and the mode is Enforce, so steps may be
	// submitted.
	enforce bool
}

// gateFor is the gate step: it reads the switch and combines it with the
// schedule's mode.
func gateFor(ctx context.Context, client kubernetes.Interface, namespace, name string, mode v1alpha1.ScheduleMode) gateState {
	gate, why := readGate(ctx, client, namespace, name)
	if why != "" {
		klog.FromContext(ctx).V(2).Info("Gate is closed", "reason", why)
	}
	observe := mode == v1alpha1.ScheduleModeObserve || gate == GateObserve
	return gateState{gate: gate, observe: observe, enforce: gate == GateOn && !observe}
}

// readGate reads the switch; any problem yields GateUnreadable and the reason.
func readGate(ctx context.Context, client kubernetes.Interface, namespace, name string) (Gate, string) {
	cm, err := client.CoreV1().ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return GateUnreadable, "gate ConfigMap " + namespace + "/" + name + " unreadable: " + err.Error()
	}
	switch v := Gate(strings.TrimSpace(strings.ToLower(cm.Data[GateKey]))); v {
	case GateOff, GateObserve, GateOn:
		return v, ""
	default:
		return GateUnreadable, "gate ConfigMap " + namespace + "/" + name + " has " + GateKey + "=" + string(v) + "; want off, observe or on"
	}
}
