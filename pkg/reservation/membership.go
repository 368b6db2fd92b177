package reservation

import (
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	appslisters "k8s.io/client-go/listers/apps/v1"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	rotav1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
)

// Workload is the top-level controller of a pod, as a reservation's members
// name it.
type Workload struct {
	Kind string
	Name string
	// Unverified says, when Kind is empty, which controller the pod claims
	// and why that claim does not count ("" for a pod without controller).
	Unverified string
}

func (w Workload) String() string {
	switch {
	case w.Kind != "":
		return w.Kind + "/" + w.Name
	case w.Unverified != "":
		return "unverified: " + w.Unverified
	default:
		return "no controller"
	}
}

// ErrNotLoaded is returned while an owner the chain reaches is read from a
// cache that has not synced yet: membership cannot be decided either way.
var ErrNotLoaded = errors.New("not loaded yet")

// Owners are the listers a pod's controller chain is resolved through. All
// but LeaderWorkerSets are required; LeaderWorkerSets is nil where the
// cluster does not serve that API, and then no chain through one verifies.
type Owners struct {
	ReplicaSets  appslisters.ReplicaSetLister
	Deployments  appslisters.DeploymentLister
	StatefulSets appslisters.StatefulSetLister
	Jobs         batchlisters.JobLister
	// Pods finds the leader pod that owns a LeaderWorkerSet group's worker
	// StatefulSet.
	Pods             corelisters.PodLister
	LeaderWorkerSets cache.GenericLister
	// LeaderWorkerSetsSynced reports whether LeaderWorkerSets has synced;
	// nil means it has.
	LeaderWorkerSetsSynced func() bool
}

// Kinds and groups of the owners a chain may pass through.
var (
	kindReplicaSet  = schema.GroupKind{Group: "apps", Kind: "ReplicaSet"}
	kindDeployment  = schema.GroupKind{Group: "apps", Kind: "Deployment"}
	kindStatefulSet = schema.GroupKind{Group: "apps", Kind: "StatefulSet"}
	kindJob         = schema.GroupKind{Group: "batch", Kind: "Job"}
	kindPod         = schema.GroupKind{Kind: "Pod"}
	kindLWS         = schema.GroupKind{Group: rotav1.LeaderWorkerSetGroup, Kind: rotav1.LeaderWorkerSetKind}
)

// WorkloadOf follows the pod's controller references to the workload a
// reservation can list: ReplicaSet -> Deployment, StatefulSet ->
// LeaderWorkerSet (leader pods), StatefulSet -> leader Pod -> StatefulSet
// -> LeaderWorkerSet (worker pods), StatefulSet, Job. Every hop is verified
// by lookup, as the workload controllers themselves decide ownership: the
// owner must exist in the pod's namespace with the referenced API group and
// UID, and its selector, where it has one, must select the object below it.
// Labels alone never make a member. A chain that fails a check gives a
// Workload with no Kind (no member matches it) saying why.
func (o *Owners) WorkloadOf(pod *v1.Pod) (Workload, error) {
	return o.podWorkload(pod, false)
}

// podWorkload resolves pod's chain; leaderOnly is set for the leader pod of
// a LeaderWorkerSet group, whose chain must end at a LeaderWorkerSet.
func (o *Owners) podWorkload(pod *v1.Pod, leaderOnly bool) (Workload, error) {
	ref := metav1.GetControllerOf(pod)
	if ref == nil {
		return Workload{}, nil
	}
	gk := groupKind(ref)
	if leaderOnly && gk != kindStatefulSet {
		return unverified(pod, ref, "a LeaderWorkerSet group's leader pod is controlled by a StatefulSet"), nil
	}
	switch gk {
	case kindReplicaSet:
		return o.viaReplicaSet(pod, ref)
	case kindStatefulSet:
		return o.viaStatefulSet(pod, ref, leaderOnly)
	case kindJob:
		job, err := o.Jobs.Jobs(pod.Namespace).Get(ref.Name)
		if w, done, err := lookupFailed(pod, ref, err); done {
			return w, err
		}
		if w, ok := verify(pod, pod.Labels, ref, job, job.Spec.Selector); !ok {
			return w, nil
		}
		return Workload{Kind: ref.Kind, Name: ref.Name}, nil
	default:
		return unverified(pod, ref, "Rota resolves only ReplicaSet (Deployment), StatefulSet (LeaderWorkerSet) and Job controllers"), nil
	}
}

func (o *Owners) viaReplicaSet(pod *v1.Pod, ref *metav1.OwnerReference) (Workload, error) {
	rs, err := o.ReplicaSets.ReplicaSets(pod.Namespace).Get(ref.Name)
	if w, done, err := lookupFailed(pod, ref, err); done {
		return w, err
	}
	if w, ok := verify(pod, pod.Labels, ref, rs, rs.Spec.Selector); !ok {
		return w, nil
	}
	dref := metav1.GetControllerOf(rs)
	if dref == nil || groupKind(dref) != kindDeployment {
		return Workload{Kind: ref.Kind, Name: rs.Name}, nil
	}
	dep, err := o.Deployments.Deployments(pod.Namespace).Get(dref.Name)
	if w, done, err := lookupFailed(rs, dref, err); done {
		return w, err
	}
	if w, ok := verify(rs, rs.Labels, dref, dep, dep.Spec.Selector); !ok {
		return w, nil
	}
	return Workload{Kind: dref.Kind, Name: dep.Name}, nil
}

func (o *Owners) viaStatefulSet(pod *v1.Pod, ref *metav1.OwnerReference, leaderOnly bool) (Workload, error) {
	sts, err := o.StatefulSets.StatefulSets(pod.Namespace).Get(ref.Name)
	if w, done, err := lookupFailed(pod, ref, err); done {
		return w, err
	}
	if w, ok := verify(pod, pod.Labels, ref, sts, sts.Spec.Selector); !ok {
		return w, nil
	}
	sref := metav1.GetControllerOf(sts)
	switch {
	case sref != nil && groupKind(sref) == kindLWS:
		return o.viaLeaderWorkerSet(sts, sref)
	case leaderOnly:
		return unverified(pod, ref, "a LeaderWorkerSet group's leader pod belongs to a StatefulSet controlled by its LeaderWorkerSet"), nil
	case sref != nil && groupKind(sref) == kindPod:
		// A LeaderWorkerSet group's workers: their StatefulSet is
		// controlled by the group's leader pod.
		leader, err := o.Pods.Pods(pod.Namespace).Get(sref.Name)
		if w, done, err := lookupFailed(sts, sref, err); done {
			return w, err
		}
		if w, ok := verify(sts, nil, sref, leader, nil); !ok {
			return w, nil
		}
		w, err := o.podWorkload(leader, true)
		if err != nil {
			return Workload{}, err
		}
		if w.Kind == "" {
			why := w.Unverified
			if why == "" {
				why = "it has no controller"
			}
			return Workload{Unverified: fmt.Sprintf("StatefulSet %s is controlled by pod %s, which is not a LeaderWorkerSet group's leader: %s", sts.Name, leader.Name, why)}, nil
		}
		if sts.Labels[rotav1.LeaderWorkerSetNameLabel] != w.Name {
			return Workload{Unverified: fmt.Sprintf("StatefulSet %s is controlled by leader pod %s of %s but is not labelled %s=%s",
				sts.Name, leader.Name, w, rotav1.LeaderWorkerSetNameLabel, w.Name)}, nil
		}
		return w, nil
	default:
		return Workload{Kind: ref.Kind, Name: sts.Name}, nil
	}
}

func (o *Owners) viaLeaderWorkerSet(sts metav1.Object, ref *metav1.OwnerReference) (Workload, error) {
	if o.LeaderWorkerSets == nil {
		return Workload{Unverified: fmt.Sprintf("StatefulSet %s claims LeaderWorkerSet %s, but the %s API was not served when this component started",
			sts.GetName(), ref.Name, rotav1.LeaderWorkerSetGroupVersion)}, nil
	}
	if o.LeaderWorkerSetsSynced != nil && !o.LeaderWorkerSetsSynced() {
		return Workload{}, fmt.Errorf("LeaderWorkerSet %s/%s: %w", sts.GetNamespace(), ref.Name, ErrNotLoaded)
	}
	obj, err := o.LeaderWorkerSets.ByNamespace(sts.GetNamespace()).Get(ref.Name)
	if w, done, err := lookupFailed(sts, ref, err); done {
		return w, err
	}
	lws, ok := obj.(metav1.Object)
	if !ok {
		return Workload{}, fmt.Errorf("unexpected object %T where LeaderWorkerSet %s/%s was expected", obj, sts.GetNamespace(), ref.Name)
	}
	if w, ok := verify(sts, nil, ref, lws, nil); !ok {
		return w, nil
	}
	if sts.GetLabels()[rotav1.LeaderWorkerSetNameLabel] != lws.GetName() {
		return Workload{Unverified: fmt.Sprintf("StatefulSet %s is controlled by LeaderWorkerSet %s but is not labelled %s=%s",
			sts.GetName(), lws.GetName(), rotav1.LeaderWorkerSetNameLabel, lws.GetName())}, nil
	}
	return Workload{Kind: ref.Kind, Name: lws.GetName()}, nil
}

// lookupFailed turns the lister's answer for child's controller ref into
// the end of the chain: an unverified Workload when the owner does not
// exist, an error when the lister failed otherwise. done is false when the
// owner was found.
func lookupFailed(child metav1.Object, ref *metav1.OwnerReference, err error) (w Workload, done bool, _ error) {
	switch {
	case err == nil:
		return Workload{}, false, nil
	case apierrors.IsNotFound(err):
		return unverified(child, ref, "it does not exist"), true, nil
	default:
		return Workload{}, true, fmt.Errorf("%s %s/%s, controller of %s: %w", ref.Kind, child.GetNamespace(), ref.Name, child.GetName(), err)
	}
}

// verify checks that owner, found for child's controller ref, has ref's UID
// and, when sel is not nil, that its selector selects childLabels, as the
// workload controllers require before they count an object as theirs.
func verify(child metav1.Object, childLabels map[string]string, ref *metav1.OwnerReference, owner metav1.Object, sel *metav1.LabelSelector) (Workload, bool) {
	if owner.GetUID() != ref.UID {
		return unverified(child, ref, fmt.Sprintf("the %s of that name has another UID", ref.Kind)), false
	}
	if sel != nil {
		s, err := metav1.LabelSelectorAsSelector(sel)
		if err != nil || s.Empty() || !s.Matches(labels.Set(childLabels)) {
			return unverified(child, ref, fmt.Sprintf("its selector does not select %s", child.GetName())), false
		}
	}
	return Workload{}, true
}

// unverified is the Workload of a chain broken at child's reference ref.
func unverified(child metav1.Object, ref *metav1.OwnerReference, why string) Workload {
	return Workload{Unverified: fmt.Sprintf("%s names controller %s %s (uid %s), but %s", child.GetName(), ref.Kind, ref.Name, refUID(ref.UID), why)}
}

func refUID(uid types.UID) string {
	if uid == "" {
		return "none"
	}
	return string(uid)
}

func groupKind(ref *metav1.OwnerReference) schema.GroupKind {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return schema.GroupKind{Group: "invalid", Kind: ref.Kind}
	}
	return schema.GroupKind{Group: gv.Group, Kind: ref.Kind}
}

// MemberName is the name of the member of res that w is, "" for none.
func MemberName(res *rotav1.GPUReservation, w Workload) string {
	if w.Kind == "" {
		return ""
	}
	for _, m := range res.Spec.Members {
		if m.WorkloadRef.Kind == w.Kind && m.WorkloadRef.Name == w.Name {
			return m.Name
		}
	}
	return ""
}
