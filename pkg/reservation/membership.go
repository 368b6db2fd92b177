package reservation

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	appslisters "k8s.io/client-go/listers/apps/v1"

	rotav1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
)

// Workload is the top-level controller of a pod, as a reservation's members
// name it.
type Workload struct {
	Kind string
	Name string
}

func (w Workload) String() string {
	if w.Kind == "" {
		return "no controller"
	}
	return w.Kind + "/" + w.Name
}

// WorkloadOf follows the pod's controller reference to the workload a
// reservation can list: ReplicaSet -> Deployment, StatefulSet, Job. Labels
// play no part, because a pod can set its own. A ReplicaSet reference is
// only followed when the ReplicaSet exists with that UID. A pod without a
// controller, or with one of another kind, gives a Workload that no member
// matches.
func WorkloadOf(pod *v1.Pod, replicaSets appslisters.ReplicaSetLister) (Workload, error) {
	ref := metav1.GetControllerOf(pod)
	if ref == nil {
		return Workload{}, nil
	}
	switch ref.Kind {
	case "StatefulSet", "Job":
		return Workload{Kind: ref.Kind, Name: ref.Name}, nil
	case "ReplicaSet":
		rs, err := replicaSets.ReplicaSets(pod.Namespace).Get(ref.Name)
		if apierrors.IsNotFound(err) {
			return Workload{Kind: "ReplicaSet", Name: ref.Name}, nil
		}
		if err != nil {
			return Workload{}, fmt.Errorf("ReplicaSet %s/%s of pod %s: %w", pod.Namespace, ref.Name, pod.Name, err)
		}
		if rs.UID != ref.UID {
			return Workload{Kind: "ReplicaSet", Name: ref.Name}, nil
		}
		if owner := metav1.GetControllerOf(rs); owner != nil && owner.Kind == "Deployment" {
			return Workload{Kind: "Deployment", Name: owner.Name}, nil
		}
		return Workload{Kind: "ReplicaSet", Name: ref.Name}, nil
	default:
		return Workload{Kind: ref.Kind, Name: ref.Name}, nil
	}
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
