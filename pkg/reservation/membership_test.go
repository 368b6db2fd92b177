package reservation

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	appslisters "k8s.io/client-go/listers/apps/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	rotav1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
)

func controllerRef(kind, name string, uid types.UID) []metav1.OwnerReference {
	return []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: kind, Name: name, UID: uid, Controller: ptr.To(true)}}
}

func TestWorkloadOf(t *testing.T) {
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, rs := range []*appsv1.ReplicaSet{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-7d9", UID: "rs-uid", OwnerReferences: controllerRef("Deployment", "web", "dep-uid")}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "bare", UID: "bare-uid"}},
	} {
		if err := indexer.Add(rs); err != nil {
			t.Fatal(err)
		}
	}
	lister := appslisters.NewReplicaSetLister(indexer)
	pod := func(labels map[string]string, refs []metav1.OwnerReference) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", Labels: labels, OwnerReferences: refs}}
	}
	tests := map[string]struct {
		pod  *v1.Pod
		want Workload
	}{
		"Deployment through its ReplicaSet": {pod: pod(nil, controllerRef("ReplicaSet", "web-7d9", "rs-uid")), want: Workload{"Deployment", "web"}},
		"StatefulSet":                       {pod: pod(nil, controllerRef("StatefulSet", "db", "x")), want: Workload{"StatefulSet", "db"}},
		"Job":                               {pod: pod(nil, controllerRef("Job", "train", "x")), want: Workload{"Job", "train"}},
		"bare ReplicaSet":                   {pod: pod(nil, controllerRef("ReplicaSet", "bare", "bare-uid")), want: Workload{"ReplicaSet", "bare"}},
		"forged ReplicaSet UID is not followed": {
			pod: pod(nil, controllerRef("ReplicaSet", "web-7d9", "forged")), want: Workload{"ReplicaSet", "web-7d9"},
		},
		"missing ReplicaSet":                   {pod: pod(nil, controllerRef("ReplicaSet", "gone", "x")), want: Workload{"ReplicaSet", "gone"}},
		"labels do not make a member":          {pod: pod(map[string]string{"app": "web", "rota.dev/member": "web"}, nil), want: Workload{}},
		"non-controller owner is not followed": {pod: pod(nil, []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "web-7d9", UID: "rs-uid"}}), want: Workload{}},
	}
	res := &rotav1.GPUReservation{Spec: rotav1.GPUReservationSpec{Members: []rotav1.ReservationMember{
		{Name: "web", WorkloadRef: rotav1.WorkloadReference{Kind: "Deployment", Name: "web"}},
		{Name: "db", WorkloadRef: rotav1.WorkloadReference{Kind: "StatefulSet", Name: "db"}},
	}}}
	wantMember := map[string]string{"Deployment through its ReplicaSet": "web", "StatefulSet": "db"}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := WorkloadOf(tc.pod, lister)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("WorkloadOf (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(wantMember[name], MemberName(res, got)); diff != "" {
				t.Errorf("MemberName (-want +got):\n%s", diff)
			}
		})
	}
}
