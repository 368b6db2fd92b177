package fairness

import (
	"time"
)

// Entry is what the queue order looks at for one pod.
type Entry struct {
	Namespace string
	Name      string
	Priority  int32
	// Created is when the pod was created: waiting ages from here.
	Created time.Time
	// Queued is when the pod last entered the queue.
	Queued time.Time
}

// Order decides which of two queued pods the scheduler tries first.
//
//  1. Higher pod priority first (as kube-scheduler's PrioritySort).
//  2. Lower fair key first. A pod's key is its tenant's weighted usage
//     (devices held ÷ weight) minus its waiting time ÷ Ageing — one Ageing
//     of waiting counts as much as one weighted device less. All pods age
//     at the same rate, so comparing keys needs no clock: the difference
//     of two keys is the difference of usage shares plus the difference of
//     creation times ÷ Ageing.
//  3. Earlier creation, then earlier queueing, then namespace and name, so
//     equal keys always order the same way.
type Order struct {
	// Share returns the weighted usage of a tenant (namespace).
	Share func(namespace string) float64
	// Ageing is how long a pod must wait to make up for one weighted device
	// its tenant holds.
	Ageing time.Duration
}

// Less reports whether a goes before b.
func (o Order) Less(a, b Entry) bool {
	if a.Priority != b.Priority {
		return a.Priority > b.Priority
	}
	if a.Namespace != b.Namespace {
		// keyA - keyB = shareA - shareB + (createdA - createdB)/Ageing
		d := o.Share(a.Namespace) - o.Share(b.Namespace)
		if o.Ageing > 0 {
			d += float64(a.Created.Sub(b.Created)) / float64(o.Ageing)
		}
		if d != 0 {
			return d < 0
		}
	}
	if !a.Created.Equal(b.Created) {
		return a.Created.Before(b.Created)
	}
	if !a.Queued.Equal(b.Queued) {
		return a.Queued.Before(b.Queued)
	}
	if a.Namespace != b.Namespace {
		return a.Namespace < b.Namespace
	}
	return a.Name < b.Name
}
