package controller

import (
	"context"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Gate is the cluster-wide switch of docs/schedule.md ("A pass", step 1).
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
