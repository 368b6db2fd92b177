// Package cyclestate reads a plugin's typed data from a scheduling cycle's
// CycleState, with one error text for a missing key and a wrong type.
package cyclestate

import (
	"fmt"

	fwk "k8s.io/kube-scheduler/framework"
)

// Read returns the data an earlier extension point wrote under key. The
// error names the key and, for data of another type, both types.
func Read[T fwk.StateData](cs fwk.CycleState, key fwk.StateKey) (T, error) {
	var zero T
	data, err := cs.Read(key)
	if err != nil {
		return zero, fmt.Errorf("reading %q from cycle state: %w", key, err)
	}
	v, ok := data.(T)
	if !ok {
		return zero, fmt.Errorf("%q in cycle state has type %T, want %T", key, data, zero)
	}
	return v, nil
}
