package reservation

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	appslisters "k8s.io/client-go/listers/apps/v1"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	rotav1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
)

func controllerRef(apiVersion, kind, name string, uid types.UID) []metav1.OwnerReference {
	return []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: name, UID: uid, Controller: ptr.To(true)}}
}

func selector(app string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}
}

func meta(name, uid, app string, refs []metav1.OwnerReference) metav1.ObjectMeta {
	m := metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(uid), OwnerReferences: refs}
	if app != "" {
		m.Labels = map[string]string{"app": app}
	}
	return m
}

func indexer(t *testing.T, objs ...any) cache.Indexer {
	t.Helper()
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, o := range objs {
		if err := idx.Add(o); err != nil {
			t.Fatal(err)
		}
	}
	return idx
}

// testOwners is a namespace with a Deployment web (and its ReplicaSet), a
// StatefulSet db, a Job train, a bare ReplicaSet, and a LeaderWorkerSet
// llm with its leader StatefulSet, one leader pod and that group's worker
// StatefulSet, as their controllers make them.
func testOwners(t *testing.T, lwsSynced bool) *Owners {
	lwsLabels := map[string]string{rotav1.LeaderWorkerSetNameLabel: "llm"}
	lws := &unstructured.Unstructured{}
	lws.SetAPIVersion(rotav1.LeaderWorkerSetGroupVersion)
	lws.SetKind(rotav1.LeaderWorkerSetKind)
	lws.SetNamespace("ns")
	lws.SetName("llm")
	lws.SetUID("lws-uid")
	leaderSTS := &appsv1.StatefulSet{
		ObjectMeta: meta("llm", "leader-sts-uid", "", controllerRef(rotav1.LeaderWorkerSetGroupVersion, "LeaderWorkerSet", "llm", "lws-uid")),
		Spec:       appsv1.StatefulSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "leader", rotav1.LeaderWorkerSetNameLabel: "llm"}}},
	}
	leaderSTS.Labels = lwsLabels
	leader := &v1.Pod{ObjectMeta: meta("llm-0", "leader-uid", "", controllerRef("apps/v1", "StatefulSet", "llm", "leader-sts-uid"))}
	leader.Labels = map[string]string{"role": "leader", rotav1.LeaderWorkerSetNameLabel: "llm"}
	workerSTS := &appsv1.StatefulSet{
		ObjectMeta: meta("llm-0", "worker-sts-uid", "", controllerRef("v1", "Pod", "llm-0", "leader-uid")),
		Spec:       appsv1.StatefulSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "worker"}}},
	}
	workerSTS.Labels = lwsLabels
	// A StatefulSet a tenant made, claiming the LeaderWorkerSet under a
	// forged UID.
	forgedSTS := &appsv1.StatefulSet{
		ObjectMeta: meta("fake-llm", "fake-sts-uid", "", controllerRef(rotav1.LeaderWorkerSetGroupVersion, "LeaderWorkerSet", "llm", "forged")),
		Spec:       appsv1.StatefulSetSpec{Selector: selector("x")},
	}
	forgedSTS.Labels = lwsLabels
	// A tenant's pod with no controller, and a StatefulSet it "leads".
	loose := &v1.Pod{ObjectMeta: meta("loose", "loose-uid", "", nil)}
	looseSTS := &appsv1.StatefulSet{
		ObjectMeta: meta("loose-workers", "loose-sts-uid", "", controllerRef("v1", "Pod", "loose", "loose-uid")),
		Spec:       appsv1.StatefulSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "worker"}}},
	}
	looseSTS.Labels = lwsLabels
	o := &Owners{
		ReplicaSets: appslisters.NewReplicaSetLister(indexer(t,
			&appsv1.ReplicaSet{ObjectMeta: meta("web-7d9", "rs-uid", "web", controllerRef("apps/v1", "Deployment", "web", "dep-uid")), Spec: appsv1.ReplicaSetSpec{Selector: selector("web")}},
			&appsv1.ReplicaSet{ObjectMeta: meta("bare", "bare-uid", "bare", nil), Spec: appsv1.ReplicaSetSpec{Selector: selector("bare")}},
			// A tenant's own ReplicaSet claiming Deployment web under a forged UID.
			&appsv1.ReplicaSet{ObjectMeta: meta("fake", "fake-rs-uid", "web", controllerRef("apps/v1", "Deployment", "web", "forged")), Spec: appsv1.ReplicaSetSpec{Selector: selector("web")}},
			// Its ReplicaSet with the real UID but labels Deployment web does not select.
			&appsv1.ReplicaSet{ObjectMeta: meta("stray", "stray-rs-uid", "other", controllerRef("apps/v1", "Deployment", "web", "dep-uid")), Spec: appsv1.ReplicaSetSpec{Selector: selector("other")}},
		)),
		Deployments: appslisters.NewDeploymentLister(indexer(t,
			&appsv1.Deployment{ObjectMeta: meta("web", "dep-uid", "", nil), Spec: appsv1.DeploymentSpec{Selector: selector("web")}})),
		StatefulSets: appslisters.NewStatefulSetLister(indexer(t,
			&appsv1.StatefulSet{ObjectMeta: meta("db", "sts-uid", "", nil), Spec: appsv1.StatefulSetSpec{Selector: selector("db")}},
			leaderSTS, workerSTS, forgedSTS, looseSTS)),
		Jobs: batchlisters.NewJobLister(indexer(t,
			&batchv1.Job{ObjectMeta: meta("train", "job-uid", "", nil), Spec: batchv1.JobSpec{Selector: selector("train")}})),
		Pods:                   corelisters.NewPodLister(indexer(t, leader, loose)),
		LeaderWorkerSets:       cache.NewGenericLister(indexer(t, lws), rotav1.LeaderWorkerSetsResource.GroupResource()),
		LeaderWorkerSetsSynced: func() bool { return lwsSynced },
	}
	return o
}

func TestWorkloadOf(t *testing.T) {
	pod := func(app string, refs []metav1.OwnerReference) *v1.Pod {
		return &v1.Pod{ObjectMeta: meta("p", "p-uid", app, refs)}
	}
	withLabels := func(p *v1.Pod, labels map[string]string) *v1.Pod {
		p.Labels = labels
		return p
	}
	tests := map[string]struct {
		pod            *v1.Pod
		want           Workload
		wantUnverified string
	}{
		"Deployment through its ReplicaSet": {pod: pod("web", controllerRef("apps/v1", "ReplicaSet", "web-7d9", "rs-uid")), want: Workload{Kind: "Deployment", Name: "web"}},
		"StatefulSet":                       {pod: pod("db", controllerRef("apps/v1", "StatefulSet", "db", "sts-uid")), want: Workload{Kind: "StatefulSet", Name: "db"}},
		"Job":                               {pod: pod("train", controllerRef("batch/v1", "Job", "train", "job-uid")), want: Workload{Kind: "Job", Name: "train"}},
		"bare ReplicaSet":                   {pod: pod("bare", controllerRef("apps/v1", "ReplicaSet", "bare", "bare-uid")), want: Workload{Kind: "ReplicaSet", Name: "bare"}},
		"LeaderWorkerSet leader": {
			pod:  withLabels(pod("", controllerRef("apps/v1", "StatefulSet", "llm", "leader-sts-uid")), map[string]string{"role": "leader", rotav1.LeaderWorkerSetNameLabel: "llm"}),
			want: Workload{Kind: "LeaderWorkerSet", Name: "llm"},
		},
		"LeaderWorkerSet worker": {
			pod:  withLabels(pod("", controllerRef("apps/v1", "StatefulSet", "llm-0", "worker-sts-uid")), map[string]string{"role": "worker"}),
			want: Workload{Kind: "LeaderWorkerSet", Name: "llm"},
		},
		"forged ReplicaSet UID": {
			pod: pod("web", controllerRef("apps/v1", "ReplicaSet", "web-7d9", "forged")), wantUnverified: "the ReplicaSet of that name has another UID",
		},
		"missing ReplicaSet": {pod: pod("web", controllerRef("apps/v1", "ReplicaSet", "gone", "x")), wantUnverified: "does not exist"},
		"ReplicaSet whose selector does not select the pod": {
			pod: pod("intruder", controllerRef("apps/v1", "ReplicaSet", "web-7d9", "rs-uid")), wantUnverified: "its selector does not select p",
		},
		"tenant ReplicaSet claiming the Deployment with a forged UID": {
			pod: pod("web", controllerRef("apps/v1", "ReplicaSet", "fake", "fake-rs-uid")), wantUnverified: "fake names controller Deployment web (uid forged), but the Deployment of that name has another UID",
		},
		"ReplicaSet the Deployment's selector does not select": {
			pod: pod("other", controllerRef("apps/v1", "ReplicaSet", "stray", "stray-rs-uid")), wantUnverified: "its selector does not select stray",
		},
		"StatefulSet reference that does not exist": {
			pod: pod("db", controllerRef("apps/v1", "StatefulSet", "ghost", "x")), wantUnverified: "StatefulSet ghost (uid x), but it does not exist",
		},
		"StatefulSet reference with a forged UID": {
			pod: pod("db", controllerRef("apps/v1", "StatefulSet", "db", "x")), wantUnverified: "has another UID",
		},
		"StatefulSet reference without UID": {
			pod: pod("db", controllerRef("apps/v1", "StatefulSet", "db", "")), wantUnverified: "(uid none)",
		},
		"StatefulSet reference in another API group": {
			pod: pod("db", controllerRef("evil.example.com/v1", "StatefulSet", "db", "sts-uid")), wantUnverified: "Rota resolves only",
		},
		"Job reference with a forged UID": {
			pod: pod("train", controllerRef("batch/v1", "Job", "train", "x")), wantUnverified: "has another UID",
		},
		"Job reference that does not exist": {
			pod: pod("train", controllerRef("batch/v1", "Job", "ghost", "x")), wantUnverified: "does not exist",
		},
		"tenant StatefulSet claiming the LeaderWorkerSet with a forged UID": {
			pod:            pod("x", controllerRef("apps/v1", "StatefulSet", "fake-llm", "fake-sts-uid")),
			wantUnverified: "fake-llm names controller LeaderWorkerSet llm (uid forged), but the LeaderWorkerSet of that name has another UID",
		},
		"workers of a StatefulSet controlled by a pod that leads no LeaderWorkerSet": {
			pod:            withLabels(pod("", controllerRef("apps/v1", "StatefulSet", "loose-workers", "loose-sts-uid")), map[string]string{"role": "worker"}),
			wantUnverified: "StatefulSet loose-workers is controlled by pod loose, which is not a LeaderWorkerSet group's leader: it has no controller",
		},
		"labels do not make a member": {pod: withLabels(pod("web", nil), map[string]string{"app": "web", "rota.dev/member": "web"}), want: Workload{}},
		"non-controller owner is not followed": {
			pod: pod("web", []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-7d9", UID: "rs-uid"}}), want: Workload{},
		},
		"controller of an unsupported kind": {pod: pod("web", controllerRef("v1", "ReplicationController", "rc", "x")), wantUnverified: "Rota resolves only"},
	}
	res := &rotav1.GPUReservation{Spec: rotav1.GPUReservationSpec{Members: []rotav1.ReservationMember{
		{Name: "web", WorkloadRef: rotav1.WorkloadReference{Kind: "Deployment", Name: "web"}},
		{Name: "db", WorkloadRef: rotav1.WorkloadReference{Kind: "StatefulSet", Name: "db"}},
		{Name: "llm", WorkloadRef: rotav1.WorkloadReference{Kind: "LeaderWorkerSet", Name: "llm"}},
	}}}
	wantMember := map[string]string{"Deployment through its ReplicaSet": "web", "StatefulSet": "db", "LeaderWorkerSet leader": "llm", "LeaderWorkerSet worker": "llm"}
	owners := testOwners(t, true)
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := owners.WorkloadOf(tc.pod)
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantUnverified != "" {
				if got.Kind != "" || !strings.Contains(got.Unverified, tc.wantUnverified) {
					t.Errorf("WorkloadOf = %+v, want unverified containing %q", got, tc.wantUnverified)
				}
			} else if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("WorkloadOf (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(wantMember[name], MemberName(res, got)); diff != "" {
				t.Errorf("MemberName (-want +got):\n%s", diff)
			}
		})
	}
}

// Until the LeaderWorkerSets are loaded, a chain through one is neither
// member nor non-member; without the API it never verifies.
func TestWorkloadOfLeaderWorkerSetNotLoaded(t *testing.T) {
	leaderPod := &v1.Pod{ObjectMeta: meta("llm-0", "leader-uid", "", controllerRef("apps/v1", "StatefulSet", "llm", "leader-sts-uid"))}
	leaderPod.Labels = map[string]string{"role": "leader", rotav1.LeaderWorkerSetNameLabel: "llm"}
	if _, err := testOwners(t, false).WorkloadOf(leaderPod); !errors.Is(err, ErrNotLoaded) {
		t.Errorf("error = %v, want ErrNotLoaded", err)
	}
	o := testOwners(t, true)
	o.LeaderWorkerSets = nil
	w, err := o.WorkloadOf(leaderPod)
	if err != nil || w.Kind != "" || !strings.Contains(w.Unverified, "was not served") {
		t.Errorf("without the API: WorkloadOf = %+v, %v; want unverified, API not served", w, err)
	}
}
