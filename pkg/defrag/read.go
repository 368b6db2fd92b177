package defrag

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/dynamic-resource-allocation/structured"

	"github.com/rota-dev/rota/pkg/advisor"
	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/gpupool"
)

// Read lists what the advisor's snapshot is built from — the driver's
// ResourceSlices (with the reservations' DeviceTaintRules applied, as the
// scheduler sees them), every ResourceClaim, pod, PodDisruptionBudget and
// DeviceClass — and returns it as advisor.Objects, the input the
// scheduler's WaitReason worker hands advisor.Build from its informers.
// The Quota plugin's limits live in the scheduler's configuration, which
// defrag does not read: its snapshot has none (docs/admission.md).
func Read(ctx context.Context, client kubernetes.Interface) (advisor.Objects, error) {
	var o advisor.Objects
	slices, err := client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	if err != nil {
		return o, fmt.Errorf("list ResourceSlices: %w", err)
	}
	rules, err := client.ResourceV1().DeviceTaintRules().List(ctx, metav1.ListOptions{})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsForbidden(err) {
		return o, fmt.Errorf("list DeviceTaintRules: %w", err)
	}
	var ruleList []*resourceapi.DeviceTaintRule
	if rules != nil {
		for i := range rules.Items {
			ruleList = append(ruleList, &rules.Items[i])
		}
	}
	ours := withReservations(slices.Items, gpupool.ReservedByRules(ruleList, gpuv1.DriverName))
	claims, err := client.ResourceV1().ResourceClaims("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return o, fmt.Errorf("list ResourceClaims: %w", err)
	}
	byName := map[string]*resourceapi.ResourceClaim{}
	claimList := make([]*resourceapi.ResourceClaim, len(claims.Items))
	for i := range claims.Items {
		c := &claims.Items[i]
		claimList[i] = c
		byName[c.Namespace+"/"+c.Name] = c
	}
	pods, err := client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return o, fmt.Errorf("list pods: %w", err)
	}
	pdbs, err := client.PolicyV1().PodDisruptionBudgets("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return o, fmt.Errorf("list PodDisruptionBudgets: %w", err)
	}
	classes, err := client.ResourceV1().DeviceClasses().List(ctx, metav1.ListOptions{})
	if err != nil {
		return o, fmt.Errorf("list DeviceClasses: %w", err)
	}
	o = advisor.Objects{
		Pool:    gpupool.NewPool(ours, claimList, nil),
		Classes: classLister(classes.Items),
		CEL:     gpupool.NewCELCache(),
		Matches: gpupool.NewMatchCache(),
		Claim: func(namespace, name string) (*resourceapi.ResourceClaim, error) {
			if c, ok := byName[namespace+"/"+name]; ok {
				return c, nil
			}
			return nil, fmt.Errorf("ResourceClaim %s/%s not found", namespace, name)
		},
	}
	for i := range pods.Items {
		o.Pods = append(o.Pods, &pods.Items[i])
	}
	for i := range pdbs.Items {
		o.PDBs = append(o.PDBs, &pdbs.Items[i])
	}
	return o, nil
}

// withReservations returns the driver's slices with each device a
// reservation's rule taints carrying that taint, as the scheduler's
// ListWithDeviceTaintRules shows them. Slices are copied before a change.
func withReservations(slices []resourceapi.ResourceSlice, reserved map[structured.DeviceID]string) []*resourceapi.ResourceSlice {
	var out []*resourceapi.ResourceSlice
	for i := range slices {
		s := &slices[i]
		if s.Spec.Driver != gpuv1.DriverName {
			continue
		}
		copied := false
		for j := range s.Spec.Devices {
			d := &s.Spec.Devices[j]
			v, ok := reserved[structured.MakeDeviceID(s.Spec.Driver, s.Spec.Pool.Name, d.Name)]
			if !ok || gpupool.ReservedBy(d) != "" {
				continue
			}
			if !copied {
				s, copied = s.DeepCopy(), true
				d = &s.Spec.Devices[j]
			}
			d.Taints = append(d.Taints, resourceapi.DeviceTaint{Key: gpuv1.ReservedTaintKey, Value: v, Effect: resourceapi.DeviceTaintEffectNoSchedule})
		}
		out = append(out, s)
	}
	return out
}

// classLister serves listed DeviceClasses to the device matcher.
type classLister []resourceapi.DeviceClass

func (l classLister) List() ([]*resourceapi.DeviceClass, error) {
	out := make([]*resourceapi.DeviceClass, len(l))
	for i := range l {
		out[i] = &l[i]
	}
	return out, nil
}

func (l classLister) Get(name string) (*resourceapi.DeviceClass, error) {
	for i := range l {
		if l[i].Name == name {
			return &l[i], nil
		}
	}
	return nil, fmt.Errorf("DeviceClass %q not found", name)
}

// waiting reports whether p waits for the scheduler: not bound, not done,
// not terminating, with at least one ResourceClaim.
func waiting(p *v1.Pod) bool {
	return p.Spec.NodeName == "" && p.DeletionTimestamp == nil && len(p.Spec.ResourceClaims) > 0 &&
		p.Status.Phase != v1.PodSucceeded && p.Status.Phase != v1.PodFailed
}
