package reservation

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"

	rsv "github.com/rota-dev/rota/pkg/reservation"
)

// reservationsByMemberIndex files a GPUReservation under each workload its
// members name (<namespace>/<kind>/<name>), so PreFilter finds a pod's
// reservations without reading the others of its namespace.
const reservationsByMemberIndex = "rota-reservations-by-member"

// undecodableMember is the reservationsByMemberIndex value, after the
// namespace, of a reservation the transform could not decode: its members
// are unknown, so every lookup in its namespace sees it and fails as a
// lookup of every reservation would.
const undecodableMember = "?undecodable"

func memberKey(namespace, kind, name string) string { return namespace + "/" + kind + "/" + name }

// reservationIndexers are the indexers the plugin adds to the
// GPUReservation informer (which has the namespace index already).
func reservationIndexers() cache.Indexers {
	return cache.Indexers{reservationsByMemberIndex: reservationMembers}
}

// toTypedReservation is the GPUReservation informer's transform: the
// dynamic client's unstructured object becomes a *GPUReservation once, when
// the informer receives that version, instead of in every cycle that reads
// it. An object that does not decode is stored as it came, and reading it
// fails as it did before the transform.
func toTypedReservation(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil // typed already, or a tombstone
	}
	res, err := rsv.FromObject(u)
	if err != nil {
		return obj, nil //nolint:nilerr // kept undecoded: readers report the error
	}
	return res, nil
}

// reservationMembers is the index function of reservationsByMemberIndex.
func reservationMembers(obj any) ([]string, error) {
	res, err := rsv.FromObject(obj)
	if err != nil {
		m, merr := meta.Accessor(obj)
		if merr != nil {
			return nil, fmt.Errorf("indexing GPUReservations by member: %w", merr)
		}
		return []string{m.GetNamespace() + "/" + undecodableMember}, nil
	}
	keys := make([]string, 0, len(res.Spec.Members))
	for _, m := range res.Spec.Members {
		keys = append(keys, memberKey(res.Namespace, m.WorkloadRef.Kind, m.WorkloadRef.Name))
	}
	return keys, nil
}
