package advisor

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/rota-dev/rota/pkg/gpupool"
)

// benchObjects is benchCluster as the scheduler's informers hold it: 1,000
// slices of 8 H100s, 6,000 running pods each with a claim allocated to one
// GPU (every third pod selected by its tenant's PodDisruptionBudget, which
// allows one disruption), and 200 pending pods each with an unallocated
// claim for 4 H100s.
func benchObjects() (slices []*resourceapi.ResourceSlice, claims map[string]*resourceapi.ResourceClaim, pods []*v1.Pod, pdbs []*policyv1.PodDisruptionBudget) {
	claims = map[string]*resourceapi.ResourceClaim{}
	serving := map[string]string{"app": "serving"}
	for i := range benchNodes {
		node := fmt.Sprintf("node-%04d", i)
		slices = append(slices, h100Slice(node, 8))
		for j := range 6 {
			ns, name := fmt.Sprintf("t%d", (i+j)%10), fmt.Sprintf("p-%04d-%d", i, j)
			c := h100Claim(ns, name, 1, node, name)
			c.Status.Allocation.Devices.Results[0].Device = fmt.Sprintf("gpu-%d", j)
			claims[ns+"/"+name] = c
			var labels map[string]string
			if j%3 == 0 {
				labels = serving
			}
			p := claimPod(ns, name, name, node, labels)
			p.Spec.NodeSelector = nil
			p.Spec.Priority = ptr.To(int32(j % 3))
			pods = append(pods, p)
		}
	}
	for i := range 200 {
		name := fmt.Sprintf("job-%03d", i)
		claims["w/"+name] = h100Claim("w", name, 4, "")
		pods = append(pods, claimPod("w", name, name, "", nil))
	}
	for t := range 10 {
		pdbs = append(pdbs, &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("t%d", t), Name: "serving"},
			Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(1)), Selector: &metav1.LabelSelector{MatchLabels: serving}}})
	}
	return slices, claims, pods, pdbs
}

// BenchmarkBuildAndAdvise200 advises the 200 pending pods of benchObjects
// from objects, snapshot build included: "per pod" builds the pool and the
// snapshot for each pod (the WaitReason worker before rounds), "one round"
// builds them once and advises every pod in it (the worker's round).
func BenchmarkBuildAndAdvise200(b *testing.B) {
	slices, claims, pods, pdbs := benchObjects()
	list := make([]*resourceapi.ResourceClaim, 0, len(claims))
	for _, c := range claims {
		list = append(list, c)
	}
	var waiting []*v1.Pod
	for _, p := range pods {
		if p.Spec.NodeName == "" {
			waiting = append(waiting, p)
		}
	}
	celCache, matches := gpupool.NewCELCache(), gpupool.NewMatchCache()
	objects := func() Objects {
		return Objects{Pool: gpupool.NewPool(slices, list, nil), Classes: classes{"gpu": {}}, CEL: celCache, Matches: matches,
			Pods: pods, PDBs: pdbs, Claim: func(ns, name string) (*resourceapi.ResourceClaim, error) {
				if c, ok := claims[ns+"/"+name]; ok {
					return c, nil
				}
				return nil, fmt.Errorf("claim %s/%s not found", ns, name)
			}}
	}
	check := func(b *testing.B, a Advice) {
		if len(a.Options) == 0 || a.Options[0].Kind != KindMove || a.Options[0].GPUs != 2 {
			b.Fatalf("advice %+v, want a 2-GPU move first", a.Options)
		}
	}
	b.Run("per pod", func(b *testing.B) {
		cpu := cpuNow()
		for b.Loop() {
			for _, p := range waiting {
				snap, unit, err := Build(b.Context(), objects(), p)
				if err != nil {
					b.Fatal(err)
				}
				check(b, Advise(snap, unit, Options{}))
			}
		}
		reportCPU(b, cpu)
	})
	b.Run("one round", func(b *testing.B) {
		cpu := cpuNow()
		for b.Loop() {
			bl, err := NewBuilder(b.Context(), objects())
			if err != nil {
				b.Fatal(err)
			}
			adv := New(bl.Snapshot())
			for _, p := range waiting {
				unit, err := bl.Unit(p)
				if err != nil {
					b.Fatal(err)
				}
				check(b, adv.Advise(unit, Options{}))
			}
		}
		reportCPU(b, cpu)
	})
}
