package controller

import (
	"context"
	"strings"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
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

// NewGateInformerFactory returns a typed informer factory that sees one
// object: the gate ConfigMap namespace/name (a metadata.name field
// selector, so list and watch are authorized by a Role naming it in
// resourceNames). Passed as Options.GateFactory and started by the caller
// with its other factories, it lets a pass read the gate without a request.
func NewGateInformerFactory(client kubernetes.Interface, namespace, name string) informers.SharedInformerFactory {
	return informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector(metav1.ObjectNameField, name).String()
		}))
}

// gateReader reads the switch: from the gate informer when there is one,
// else with a GET.
type gateReader struct {
	client          kubernetes.Interface
	namespace, name string
	// lister and synced are the gate informer's (nil without one).
	lister corelisters.ConfigMapLister
	synced cache.InformerSynced
}

// gateFor is the gate step: it reads the switch and combines it with the
// schedule's mode.
func (g gateReader) gateFor(ctx context.Context, mode v1alpha1.ScheduleMode) gateState {
	gate, why := g.read(ctx)
	if why != "" {
		klog.FromContext(ctx).V(2).Info("Gate is closed", "reason", why)
	}
	observe := mode == v1alpha1.ScheduleModeObserve || gate == GateObserve
	return gateState{gate: gate, observe: observe, enforce: gate == GateOn && !observe}
}

// read reads the switch; any problem — including a gate informer that has
// not synced — yields GateUnreadable and the reason (fail closed).
func (g gateReader) read(ctx context.Context) (Gate, string) {
	cm, err := g.get(ctx)
	if err != nil {
		return GateUnreadable, "gate ConfigMap " + g.namespace + "/" + g.name + " unreadable: " + err.Error()
	}
	switch v := Gate(strings.TrimSpace(strings.ToLower(cm.Data[GateKey]))); v {
	case GateOff, GateObserve, GateOn:
		return v, ""
	default:
		return GateUnreadable, "gate ConfigMap " + g.namespace + "/" + g.name + " has " + GateKey + "=" + string(v) + "; want off, observe or on"
	}
}

func (g gateReader) get(ctx context.Context) (*v1.ConfigMap, error) {
	if g.lister == nil {
		return g.client.CoreV1().ConfigMaps(g.namespace).Get(ctx, g.name, metav1.GetOptions{})
	}
	if !g.synced() {
		return nil, errGateNotSynced
	}
	cm, err := g.lister.ConfigMaps(g.namespace).Get(g.name)
	if apierrors.IsNotFound(err) {
		// The API's words, not the lister's ("configmap").
		return nil, apierrors.NewNotFound(v1.Resource("configmaps"), g.name)
	}
	return cm, err
}

// errGateNotSynced: the gate informer has not listed the ConfigMap yet.
var errGateNotSynced = gateError("the gate informer has not synced yet")

type gateError string

func (e gateError) Error() string { return string(e) }
