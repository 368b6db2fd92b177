package gpupool

import (
	"context"

	fwk "k8s.io/kube-scheduler/framework"
)

// poolStateKey is where the first plugin that needs the pool in a
// scheduling cycle leaves it for the others.
const poolStateKey fwk.StateKey = "RotaGPUPool"

// cyclePool holds a read-only pool; Clone may share it.
type cyclePool struct{ pool *Pool }

func (c *cyclePool) Clone() fwk.StateData { return c }

// CycleSnapshot returns the pool of the scheduling cycle cs: Quota,
// Fairness, Gang and WaitReason all read the same devices and claims, so
// the first of them to ask takes the snapshot and the others reuse it
// instead of walking every slice and claim again. The pool is read only.
// A nil cs takes a fresh snapshot. views is the caller's slice-index cache
// (nil for none): the index is rebuilt only when the slice list changed.
func CycleSnapshot(ctx context.Context, cs fwk.CycleState, dra fwk.SharedDRAManager, views *SliceCache) (*Pool, error) {
	if cs != nil {
		if data, err := cs.Read(poolStateKey); err == nil {
			if c, ok := data.(*cyclePool); ok {
				return c.pool, nil
			}
		}
	}
	pool, err := Snapshot(ctx, dra, views)
	if err != nil {
		return nil, err
	}
	if cs != nil {
		cs.Write(poolStateKey, &cyclePool{pool: pool})
	}
	return pool, nil
}
