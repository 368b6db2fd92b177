package controller

import (
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic/dynamicinformer"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	rotav1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/pkg/reservation"
)

// TestEventsWakeOnlyTheReservationsTheyConcern: team-a/a and team-a/b
// reserve GPUs of n1, team-b/c of n2. A DeviceTaintRule wakes its owner and
// the reservations of its device's node; a slice or a node the
// reservations of that node; a pod or claim those of its namespace.
func TestEventsWakeOnlyTheReservationsTheyConcern(t *testing.T) {
	client := fake.NewClientset()
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{rotav1.GPUReservationsResource: "GPUReservationList"})
	inf := NewInformers(informers.NewSharedInformerFactory(client, 0), dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0))
	c, err := New(Options{Client: client, Dynamic: dyn, Clock: clocktesting.NewFakePassiveClock(time.Now()), Recorder: record.NewFakeRecorder(10), Informers: inf})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []struct{ ns, name, node string }{{"team-a", "a", "n1"}, {"team-a", "b", "n1"}, {"team-b", "c", "n2"}} {
		u, err := reservation.ToUnstructured(&rotav1.GPUReservation{
			TypeMeta:   metav1.TypeMeta{APIVersion: rotav1.SchemeGroupVersion.String(), Kind: "GPUReservation"},
			ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: r.name}, Spec: rotav1.GPUReservationSpec{NodeName: r.node},
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := inf.Reservations.Informer().GetIndexer().Add(u); err != nil {
			t.Fatal(err)
		}
	}
	nodeSlice := func(node string) *resourceapi.ResourceSlice {
		return &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: node + "-gpus"}, Spec: resourceapi.ResourceSliceSpec{
			Driver: gpuv1.DriverName, NodeName: ptr.To(node), Pool: resourceapi.ResourcePool{Name: node + "-pool"}}}
	}
	for _, node := range []string{"n1", "n2", "n3"} {
		if err := inf.Slices.Informer().GetIndexer().Add(nodeSlice(node)); err != nil {
			t.Fatal(err)
		}
	}
	rule := func(pool string, owner ...string) *resourceapi.DeviceTaintRule {
		r := &resourceapi.DeviceTaintRule{Spec: resourceapi.DeviceTaintRuleSpec{
			DeviceSelector: &resourceapi.DeviceTaintSelector{Driver: ptr.To(gpuv1.DriverName), Pool: ptr.To(pool), Device: ptr.To("gpu-0")},
			Taint:          resourceapi.DeviceTaint{Key: gpuv1.ReservedTaintKey, Value: "x", Effect: resourceapi.DeviceTaintEffectNoSchedule},
		}}
		if len(owner) == 2 {
			r.Labels = map[string]string{gpuv1.ReservationNamespaceLabel: owner[0], gpuv1.ReservationNameLabel: owner[1]}
		}
		return r
	}
	drain := func() []string {
		var keys []string
		for c.queue.Len() > 0 {
			k, _ := c.queue.Get()
			keys = append(keys, k)
			c.queue.Done(k)
		}
		slices.Sort(keys)
		return keys
	}
	for _, tc := range []struct {
		name  string
		event func()
		want  []string
	}{
		{"a rule of a on n1's GPU", func() { c.enqueueForRule(rule("n1-pool", "team-a", "a")) }, []string{"team-a/a", "team-a/b"}},
		{"a rule of c on n1's GPU", func() { c.enqueueForRule(rule("n1-pool", "team-b", "c")) }, []string{"team-a/a", "team-a/b", "team-b/c"}},
		{"someone else's rule on n2's GPU", func() { c.enqueueForRule(rule("n2-pool")) }, []string{"team-b/c"}},
		{"a rule on a node without reservations", func() { c.enqueueForRule(rule("n3-pool")) }, nil},
		{"a rule of a pool no slice publishes", func() { c.enqueueForRule(rule("gone", "team-a", "a")) }, []string{"team-a/a"}},
		{"n2's slice", func() { c.enqueueForSlice(nodeSlice("n2")) }, []string{"team-b/c"}},
		{"node n1", func() { c.enqueueForNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}) }, []string{"team-a/a", "team-a/b"}},
		{"a pod in team-b", func() { c.enqueueNamespaceOf(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "p"}}) }, []string{"team-b/c"}},
		{"a claim in team-c", func() {
			c.enqueueNamespaceOf(&resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "team-c", Name: "x"}})
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.event()
			if got := drain(); !slices.Equal(got, tc.want) {
				t.Errorf("enqueued %v, want %v", got, tc.want)
			}
		})
	}
}
