package controller

import (
	"context"
	"regexp"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	rotav1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/pkg/reservation"
)

// twoGPUSlice publishes gpu-0 and gpu-1 of node n1 with UUIDs GPU-gpu-0
// and GPU-gpu-1.
func twoGPUSlice() *resourceapi.ResourceSlice {
	s := &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "n1-gpus"},
		Spec: resourceapi.ResourceSliceSpec{
			Driver: gpuv1.DriverName, NodeName: ptr.To("n1"),
			Pool: resourceapi.ResourcePool{Name: "n1", ResourceSliceCount: 1},
		},
	}
	for i, name := range []string{"gpu-0", "gpu-1"} {
		s.Spec.Devices = append(s.Spec.Devices, resourceapi.Device{Name: name, Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
			gpuv1.AttributeUUID:  {StringValue: ptr.To("GPU-" + name)},
			gpuv1.AttributeIndex: {IntValue: ptr.To(int64(i))},
			"model":              {StringValue: ptr.To("H200")},
		}})
	}
	return s
}

var classUUID = regexp.MustCompile(`"(GPU-[^"]+)"`)

// untaintedButSelected lists the GPUs that the reservation's class selects
// while no rule taints them, in the objects the fake API server holds now.
func untaintedButSelected(t *testing.T, client *fake.Clientset) []string {
	t.Helper()
	tracker := client.Tracker()
	obj, err := tracker.Get(resourceapi.SchemeGroupVersion.WithResource("deviceclasses"), "", ClassName("ns", "r"))
	if err != nil {
		return nil // no class, nothing selected
	}
	list, err := tracker.List(resourceapi.SchemeGroupVersion.WithResource("devicetaintrules"), resourceapi.SchemeGroupVersion.WithKind("DeviceTaintRule"), "")
	if err != nil {
		t.Fatal(err)
	}
	tainted := map[string]bool{}
	for _, r := range list.(*resourceapi.DeviceTaintRuleList).Items {
		tainted["GPU-"+*r.Spec.DeviceSelector.Device] = true
	}
	var bad []string
	for _, m := range classUUID.FindAllStringSubmatch(obj.(*resourceapi.DeviceClass).Spec.Selectors[0].CEL.Expression, -1) {
		if !tainted[m[1]] {
			bad = append(bad, m[1])
		}
	}
	return bad
}

// TestClassNeverSelectsUntaintedGPUs: through every write the controller
// makes while it holds GPUs, moves the hold to another GPU and releases it,
// the reservation's DeviceClass selects only GPUs a DeviceTaintRule taints,
// so a crash between any two writes cannot leave an untainted GPU that the
// class hands out. The state is checked before each write (the result of
// all earlier ones) and at the end.
func TestClassNeverSelectsUntaintedGPUs(t *testing.T) {
	// The reactor goes in before the informers start: the fake client
	// does not guard its reactor chain against a concurrent call.
	var writes []string
	ctx, _, c, client, dyn := startedController(t, func(client *fake.Clientset) {
		client.PrependReactor("*", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
			res := a.GetResource().Resource
			if a.GetVerb() == "get" || a.GetVerb() == "list" || a.GetVerb() == "watch" || (res != "deviceclasses" && res != "devicetaintrules") {
				return false, nil, nil
			}
			if bad := untaintedButSelected(t, client); len(bad) > 0 {
				t.Errorf("before %s %s: the class selects untainted %v (writes so far %v)", a.GetVerb(), res, bad, writes)
			}
			writes = append(writes, a.GetVerb()+" "+res)
			return false, nil, nil
		})
	})
	if _, err := client.ResourceV1().ResourceSlices().Create(ctx, twoGPUSlice(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	setUUIDs := func(uuids ...string) {
		u, err := dyn.Resource(rotav1.GPUReservationsResource).Namespace("ns").Get(ctx, "r", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		res, err := reservation.FromObject(u)
		if err != nil {
			t.Fatal(err)
		}
		res.Spec.Count, res.Spec.DeviceUUIDs = nil, uuids
		if u, err = reservation.ToUnstructured(res); err != nil {
			t.Fatal(err)
		}
		if _, err := dyn.Resource(rotav1.GPUReservationsResource).Namespace("ns").Update(ctx, u, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// settle waits until the controller's informer holds what the fake
	// API server holds: the fake lets a status write from a stale copy
	// overwrite the spec, which a real API server refuses.
	settle := func() {
		t.Helper()
		err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			stored, err := dyn.Resource(rotav1.GPUReservationsResource).Namespace("ns").Get(ctx, "r", metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			cached, err := c.reservations.ByNamespace("ns").Get("r")
			return err == nil && apiequality.Semantic.DeepEqual(stored, cached), nil
		})
		if err != nil {
			t.Fatalf("the informer did not catch up: %v", err)
		}
	}
	// syncUntil syncs (the informers catch up between tries) until the
	// rules hold exactly the devices want.
	syncUntil := func(what string, want ...string) {
		t.Helper()
		err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			if err := c.sync(ctx, "ns/r"); err != nil {
				t.Logf("sync: %v", err)
			}
			rules, _ := client.ResourceV1().DeviceTaintRules().List(ctx, metav1.ListOptions{LabelSelector: labels.Everything().String()})
			var got []string
			for _, r := range rules.Items {
				got = append(got, *r.Spec.DeviceSelector.Device)
			}
			return equalSets(got, want), nil
		})
		if err != nil {
			t.Fatalf("%s: %v (writes %v)", what, err, writes)
		}
	}
	setUUIDs("GPU-gpu-0")
	settle()
	syncUntil("hold gpu-0", "gpu-0")
	settle()
	setUUIDs("GPU-gpu-1")
	settle()
	syncUntil("move the hold to gpu-1", "gpu-1")
	if err := dyn.Resource(rotav1.GPUReservationsResource).Namespace("ns").Delete(ctx, "r", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	syncUntil("release")
	if bad := untaintedButSelected(t, client); len(bad) > 0 {
		t.Errorf("at the end the class selects untainted %v", bad)
	}
	if _, err := client.ResourceV1().DeviceClasses().Get(ctx, ClassName("ns", "r"), metav1.GetOptions{}); err == nil {
		t.Error("the released reservation's class is still there")
	}
	t.Logf("writes: %v", writes)
}

func equalSets(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	m := map[string]int{}
	for _, x := range a {
		m[x]++
	}
	for _, x := range b {
		m[x]--
		if m[x] < 0 {
			return false
		}
	}
	return true
}
