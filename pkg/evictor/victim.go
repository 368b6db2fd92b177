package evictor

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// Victim is a pod a reclaim evicts, with what its Events say about why.
type Victim struct {
	// Pod and UID name the pod; a pod of that name with another UID is a
	// replacement and is left alone.
	Pod types.NamespacedName
	UID types.UID
	// Tenant is the victim's tenant, the one that borrowed the GPUs.
	Tenant string
	// For is what the GPUs go back to.
	For Reclaimer
	// Numbers are the counts behind the decision, for the Events.
	Numbers Numbers
	// Why, when set, is the reason the Events give instead of a reclaim's
	// (a preemption by priority within the victim's own tenant).
	Why string
}

// Reclaimer is the tenant whose guarantee the reclaim serves and the pod or
// gang of it that waits for the GPUs.
type Reclaimer struct {
	Tenant string
	// Gang is the waiting gang's name; "" when a single pod waits.
	Gang string
	// Pod is the waiting pod (a member of Gang when Gang is set); the
	// Events name it as their related object when set.
	Pod types.NamespacedName
}

// Numbers are the GPU counts of one model that justify a reclaim.
type Numbers struct {
	// Model is the GPU model ("H100").
	Model string
	// Taken is how many GPUs of Model this victim gives back.
	Taken int64
	// ReclaimerHolds and ReclaimerGuarantee are the reclaiming tenant's
	// GPUs of Model held and guaranteed; ReclaimerNeeds what its waiting
	// pod or gang needs.
	ReclaimerHolds, ReclaimerGuarantee, ReclaimerNeeds int64
	// VictimHolds and VictimGuarantee are the victim's tenant's GPUs of
	// Model held and guaranteed; what it holds above the guarantee is
	// borrowed.
	VictimHolds, VictimGuarantee int64
}

// waiter names the reclaimer's waiting pod or gang: "gang train",
// "pod train-0".
func (r Reclaimer) waiter() string {
	switch {
	case r.Gang != "":
		return "gang " + r.Gang
	case r.Pod.Name != "":
		return "pod " + r.Pod.Name
	}
	return "pods"
}

// related is the object the Events name beside the victim: the waiting
// pod, when known.
func (r Reclaimer) related() runtime.Object {
	if r.Pod.Name == "" {
		return nil
	}
	return &v1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: r.Pod.Namespace, Name: r.Pod.Name}
}

// Reason is the victim's story in one line: "reclaimed for tenant team-a's
// guarantee: team-a holds 0 of its 8 guaranteed H100 and its gang train
// needs 4; team-b holds 16 with 8 guaranteed, 8 borrowed; this pod gives
// back 4".
func (v Victim) Reason() string {
	if v.Why != "" {
		return v.Why
	}
	n := v.Numbers
	borrowed := max(n.VictimHolds-n.VictimGuarantee, 0)
	victimTenant := v.Tenant
	if victimTenant == "" {
		victimTenant = "its tenant"
	}
	s := fmt.Sprintf("reclaimed for tenant %s's guarantee: %s holds %d of its %d guaranteed %s and its %s needs %d; %s holds %d with %d guaranteed, %d borrowed",
		v.For.Tenant, v.For.Tenant, n.ReclaimerHolds, n.ReclaimerGuarantee, n.Model, v.For.waiter(), n.ReclaimerNeeds,
		victimTenant, n.VictimHolds, n.VictimGuarantee, borrowed)
	if n.Taken > 0 {
		s += fmt.Sprintf("; this pod gives back %d", n.Taken)
	}
	return s
}
