package defrag

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/rota-dev/rota/pkg/advisor"
	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/gpupool"
)

// fixture is a cluster as listed objects: nodes of H100s, claims, pods.
type fixture struct {
	slices  []*resourceapi.ResourceSlice
	claims  map[string]*resourceapi.ResourceClaim
	pods    []*v1.Pod
	pdbs    []*policyv1.PodDisruptionBudget
	created time.Time
}

func newFixture(nodes map[string]int) *fixture {
	f := &fixture{claims: map[string]*resourceapi.ResourceClaim{}, created: time.Date(2026, 10, 19, 9, 0, 0, 0, time.UTC)}
	for node, n := range nodes {
		s := &resourceapi.ResourceSlice{Spec: resourceapi.ResourceSliceSpec{Driver: gpuv1.DriverName, NodeName: ptr.To(node),
			Pool: resourceapi.ResourcePool{Name: node, ResourceSliceCount: 1}}}
		for i := range n {
			s.Spec.Devices = append(s.Spec.Devices, resourceapi.Device{Name: fmt.Sprintf("gpu-%d", i),
				Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{gpuv1.AttributeModel: {StringValue: ptr.To("H100")}}})
		}
		f.slices = append(f.slices, s)
	}
	return f
}

// claim adds a claim for count H100s, allocated to devices (node/gpu-i)
// and reserved for pods when devices are given.
func (f *fixture) claim(ns, name string, count int64, devices []string, pods ...string) {
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: "gpu",
			Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu", Count: count, AllocationMode: resourceapi.DeviceAllocationModeExactCount,
				Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: fmt.Sprintf(`device.attributes[%q].model == "H100"`, gpuv1.DriverName)}}}}}}}}}
	if len(devices) > 0 {
		c.Status.Allocation = &resourceapi.AllocationResult{}
		for _, d := range devices {
			node, dev, _ := strings.Cut(d, "/")
			c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results,
				resourceapi.DeviceRequestAllocationResult{Request: "gpu", Driver: gpuv1.DriverName, Pool: node, Device: dev})
		}
		for _, p := range pods {
			c.Status.ReservedFor = append(c.Status.ReservedFor, resourceapi.ResourceClaimConsumerReference{Resource: "pods", Name: p})
		}
	}
	f.claims[ns+"/"+name] = c
}

// pod adds a pod using claim, bound to node ("" for pending, pinned by a
// hostname selector when bound), created a minute after the last one.
func (f *fixture) pod(ns, name, claim, node string, labels map[string]string) *v1.Pod {
	f.created = f.created.Add(time.Minute)
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels, UID: types.UID(ns + "-" + name),
		CreationTimestamp: metav1.NewTime(f.created)},
		Spec: v1.PodSpec{NodeName: node, ResourceClaims: []v1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To(claim)}}}}
	if node != "" {
		p.Spec.NodeSelector = map[string]string{v1.LabelHostname: node}
	}
	f.pods = append(f.pods, p)
	return p
}

// running adds a pod holding one GPU on node through its own claim.
func (f *fixture) running(ns, name, device string, labels map[string]string) *v1.Pod {
	f.claim(ns, name, 1, []string{device}, name)
	node, _, _ := strings.Cut(device, "/")
	return f.pod(ns, name, name, node, labels)
}

// gang adds a pending 2-GPU unit: two ranks sharing one claim.
func (f *fixture) gang(ns, name string) []*v1.Pod {
	f.claim(ns, name, 2, nil)
	return []*v1.Pod{f.pod(ns, name+"-0", name, "", nil), f.pod(ns, name+"-1", name, "", nil)}
}

func (f *fixture) objects() advisor.Objects {
	var list []*resourceapi.ResourceClaim
	for _, c := range f.claims {
		list = append(list, c)
	}
	return advisor.Objects{Pool: gpupool.NewPool(f.slices, list, nil), Classes: classLister{{ObjectMeta: metav1.ObjectMeta{Name: "gpu"}}},
		CEL: gpupool.NewCELCache(), Matches: gpupool.NewMatchCache(), Pods: f.pods, PDBs: f.pdbs,
		Claim: func(ns, name string) (*resourceapi.ResourceClaim, error) {
			if c, ok := f.claims[ns+"/"+name]; ok {
				return c, nil
			}
			return nil, fmt.Errorf("claim %s/%s not found", ns, name)
		}}
}

func evictions(p *Plan) []string {
	var out []string
	for _, e := range p.Evictions {
		out = append(out, fmt.Sprintf("%s ← %s (%s, uid %s)", e.Unit, e.Pod, e.Node, e.UID))
	}
	return out
}

// threeNodes: three nodes of 2 H100, one pinned 1-GPU replica of team-a on
// each, and two 2-GPU gangs waiting, team-b's created first.
func threeNodes() *fixture {
	f := newFixture(map[string]int{"n1": 2, "n2": 2, "n3": 2})
	for i, n := range []string{"n1", "n2", "n3"} {
		f.running("team-a", fmt.Sprintf("a-%d", i+1), n+"/gpu-0", map[string]string{"app": "serving"})
	}
	f.gang("team-b", "ranks")
	f.gang("team-c", "job")
	return f
}

// Every waiting gang gets its own freed GPUs: the oldest first, each
// planned around the earlier ones.
func TestMakeEveryGang(t *testing.T) {
	plan, err := Make(t.Context(), threeNodes().objects(), "", advisor.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"team-b/ranks-0 ← team-a/a-1 (n1, uid team-a-a-1)",
		"team-c/job-0 ← team-a/a-2 (n2, uid team-a-a-2)",
	}
	if diff := cmp.Diff(want, evictions(plan)); diff != "" {
		t.Errorf("evictions (-want +got):\n%s", diff)
	}
	if len(plan.Units) != 2 || plan.Units[0].Outcome != advisor.OutcomeMove || len(plan.Units[0].Pods) != 2 {
		t.Errorf("units %+v, want team-b's two ranks admitted by a move first", plan.Units)
	}
}

// A higher priority is planned first, whatever its age.
func TestMakePriorityFirst(t *testing.T) {
	f := threeNodes()
	for _, p := range f.pods {
		if p.Namespace == "team-c" {
			p.Spec.Priority = ptr.To[int32](1000)
		}
	}
	plan, err := Make(t.Context(), f.objects(), "", advisor.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := evictions(plan); len(got) != 2 || !strings.HasPrefix(got[0], "team-c/job-0 ← team-a/a-1") {
		t.Errorf("evictions %v, want team-c's gang (priority 1000) planned first, onto n1", got)
	}
}

// -n scopes the waiting pods planned for, not the pods a plan may evict.
func TestMakeNamespace(t *testing.T) {
	plan, err := Make(t.Context(), threeNodes().objects(), "team-c", advisor.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"team-c/job-0 ← team-a/a-1 (n1, uid team-a-a-1)"}, evictions(plan)); diff != "" {
		t.Errorf("evictions (-want +got):\n%s", diff)
	}
}

func TestMakeNothingWaiting(t *testing.T) {
	f := newFixture(map[string]int{"n1": 2})
	f.running("team-a", "a-1", "n1/gpu-0", nil)
	plan, err := Make(t.Context(), f.objects(), "", advisor.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := WriteText(&b, plan); err != nil {
		t.Fatal(err)
	}
	if plan.Waiting() != 0 || !strings.HasPrefix(b.String(), "Nothing waiting") {
		t.Errorf("plan %+v, text %q; want nothing waiting", plan, b.String())
	}
}

// Hostile tenant: team-x labels its own pod like team-a's replicas (the
// selector of team-a's budget) and like team-b's gang. A budget counts
// only its namespace's pods and a gang only its namespace's members, so
// the lookalike neither makes room in team-a's budget nor joins the gang:
// with team-a's budget at minAvailable 2 nothing may be evicted.
func TestMakeLookalikeLabelsChangeNothing(t *testing.T) {
	f := newFixture(map[string]int{"n1": 2, "n2": 2})
	serving := map[string]string{"app": "serving"}
	f.running("team-a", "a-1", "n2/gpu-0", serving)
	f.running("team-a", "a-2", "n1/gpu-0", serving)
	f.running("team-x", "x-1", "n2/gpu-1", map[string]string{"app": "serving", gpuv1.GangLabel: "ranks"})
	f.gang("team-b", "ranks")
	for _, p := range f.pods {
		if p.Namespace == "team-b" {
			p.Labels = map[string]string{gpuv1.GangLabel: "ranks"}
		}
	}
	f.pdbs = []*policyv1.PodDisruptionBudget{{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "serving"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(2)), Selector: &metav1.LabelSelector{MatchLabels: serving}}}}
	plan, err := Make(t.Context(), f.objects(), "", advisor.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Evictions) != 0 || len(plan.Units) != 1 || plan.Units[0].Outcome != advisor.OutcomeBlocked ||
		!strings.Contains(plan.Units[0].Reason, "PodDisruptionBudget team-a/serving (0 disruptions allowed") {
		t.Fatalf("plan %+v, want team-b blocked by team-a's budget and nothing evicted", plan)
	}
	if got := plan.Units[0].Pods; !cmp.Equal(got, []string{"team-b/ranks-0", "team-b/ranks-1"}) {
		t.Errorf("team-b's unit has pods %v, want only its two ranks", got)
	}
}

// --approved: a plan differs from the approved one when a new waiting unit
// adds evictions (a tenant's new pod) or a planned pod was recreated.
func TestDiffers(t *testing.T) {
	f := threeNodes()
	approved, err := Make(t.Context(), f.objects(), "", advisor.Options{})
	if err != nil {
		t.Fatal(err)
	}
	same, err := Make(t.Context(), f.objects(), "", advisor.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if d := same.Differs(approved); d != "" {
		t.Errorf("the same cluster differs: %s", d)
	}
	f.gang("team-x", "more")
	more, err := Make(t.Context(), f.objects(), "", advisor.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if d := more.Differs(approved); !strings.Contains(d, "team-x/more-0 ← team-a/a-3") {
		t.Errorf("a new gang's eviction not told apart: %q", d)
	}
	f = threeNodes()
	f.pods[0].UID = "recreated"
	recreated, err := Make(t.Context(), f.objects(), "", advisor.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if d := recreated.Differs(approved); !strings.Contains(d, "team-a/a-1 (uid recreated)") {
		t.Errorf("a recreated pod not told apart: %q", d)
	}
}
