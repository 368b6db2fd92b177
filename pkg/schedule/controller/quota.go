package controller

import (
	"context"
	"fmt"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// quotaSuffix is how Kubernetes names the per-DeviceClass device quota:
// "<class>.deviceclass.resource.k8s.io/devices" (v1.ResourceClaimsPerClass).
const quotaSuffix = v1.ResourceClaimsPerClass

// delta is how many replicas a step adds (acquire) or removes (release).
func delta(pl planned) int64 {
	cur := int64(0)
	if pl.t.wl != nil {
		cur = int64(pl.t.wl.Replicas)
	}
	d := int64(replicasOf(pl.s)) - cur
	if d < 0 {
		d = -d
	}
	return d
}

// podDelta is how many pods a step adds or removes.
func podDelta(pl planned) int64 {
	if pl.t.wl == nil {
		return delta(pl)
	}
	return delta(pl) * int64(pl.t.wl.podsPerReplica())
}

// checkQuota compares, per ResourceQuota and device class, hard against the
// usage of the namespace's claims, minus what release steps free, plus what
// acquire steps add. Usage is computed from the claims themselves (as the
// quota evaluator does) so that no quota controller needs to have run.
func checkQuota(ctx context.Context, client kubernetes.Interface, namespace string, release, acquire []planned, perReplica map[string]v1.ResourceList) (planned, string, error) {
	if len(acquire) == 0 {
		return planned{}, "", nil
	}
	quotas, err := client.CoreV1().ResourceQuotas(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return acquire[0], "", fmt.Errorf("list ResourceQuotas: %w", err)
	}
	var relevant []v1.ResourceQuota
	for _, q := range quotas.Items {
		for name := range q.Spec.Hard {
			if strings.HasSuffix(string(name), quotaSuffix) {
				relevant = append(relevant, q)
				break
			}
		}
	}
	if len(relevant) == 0 {
		return planned{}, "", nil
	}
	claims, err := client.ResourceV1().ResourceClaims(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return acquire[0], "", fmt.Errorf("list ResourceClaims: %w", err)
	}
	used := v1.ResourceList{}
	for i := range claims.Items {
		if claims.Items[i].DeletionTimestamp != nil {
			continue
		}
		addScaled(used, claimUsage([]resourceapi.ResourceClaimSpec{claims.Items[i].Spec}), 1)
	}
	for _, pl := range release {
		addScaled(used, perReplica[pl.t.spec.Name], -delta(pl))
	}
	for _, pl := range acquire {
		addScaled(used, perReplica[pl.t.spec.Name], delta(pl))
		for _, q := range relevant {
			names := make([]string, 0, len(q.Spec.Hard))
			for name := range q.Spec.Hard {
				names = append(names, string(name))
			}
			sort.Strings(names)
			for _, name := range names {
				if !strings.HasSuffix(name, quotaSuffix) {
					continue
				}
				hard := q.Spec.Hard[v1.ResourceName(name)]
				u := used[v1.ResourceName(name)]
				if u.Cmp(hard) > 0 {
					return pl, fmt.Sprintf("starting %d pod(s) of target %s would use %s of %s in ResourceQuota %s (hard %s), counting what this transition releases first",
						podDelta(pl), pl.t.spec.Name, u.String(), name, q.Name, hard.String()), nil
				}
			}
		}
	}
	return planned{}, "", nil
}

// claimUsage is the device quota a set of claim specs charges, per class,
// counting the worst case of a firstAvailable list as Kubernetes does.
func claimUsage(specs []resourceapi.ResourceClaimSpec) v1.ResourceList {
	out := v1.ResourceList{}
	for _, spec := range specs {
		for _, req := range spec.Devices.Requests {
			switch {
			case req.Exactly != nil:
				add(out, req.Exactly.DeviceClassName, countOf(req.Exactly.AllocationMode, req.Exactly.Count))
			case len(req.FirstAvailable) > 0:
				worst := map[string]int64{}
				for _, sub := range req.FirstAvailable {
					if n := countOf(sub.AllocationMode, sub.Count); n > worst[sub.DeviceClassName] {
						worst[sub.DeviceClassName] = n
					}
				}
				for class, n := range worst {
					add(out, class, n)
				}
			}
		}
	}
	return out
}

func countOf(mode resourceapi.DeviceAllocationMode, count int64) int64 {
	switch mode {
	case resourceapi.DeviceAllocationModeAll:
		return resourceapi.AllocationResultsMaxSize
	case resourceapi.DeviceAllocationModeExactCount, "":
		if count == 0 {
			return 1
		}
		return count
	}
	return 0
}

func add(l v1.ResourceList, class string, n int64) {
	name := v1.ResourceName(class + quotaSuffix)
	q := l[name]
	q.Add(*resource.NewQuantity(n, resource.DecimalSI))
	l[name] = q
}

func addScaled(dst, src v1.ResourceList, factor int64) {
	for name, q := range src {
		d := dst[name]
		d.Add(*resource.NewQuantity(q.Value()*factor, resource.DecimalSI))
		dst[name] = d
	}
}

// replicaUsage is the device quota one replica charges.
func replicaUsage(demand []podDemand) v1.ResourceList {
	out := v1.ResourceList{}
	for _, d := range demand {
		addScaled(out, claimUsage(d.Specs), int64(d.Pods))
	}
	return out
}
