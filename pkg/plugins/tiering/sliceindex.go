package tiering

import (
	"fmt"
	"slices"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/dynamic-resource-allocation/structured"
)

// Indexes Tiering adds to the scheduler's ResourceSlice and DeviceTaintRule
// informers, so that the health recheck of Reserve and PreBind reads the
// slices and taint rules of the granted devices' pools instead of listing
// every slice of the cluster with every rule applied.
const (
	// slicesByPoolIndex files a slice under <driver>/<pool>.
	slicesByPoolIndex = "rota-tiering-slices-by-pool"
	// taintRulesByPoolIndex files a DeviceTaintRule under the <driver>/<pool>
	// its selector names, anyKey standing for a driver or pool it leaves
	// open. A rule without a selector taints nothing and is not filed.
	taintRulesByPoolIndex = "rota-tiering-taint-rules-by-pool"
)

// anyKey stands for an unset driver or pool of a taint rule's selector; no
// driver or pool name has this form.
const anyKey = "*"

func poolIndexKey(driver, pool string) string { return driver + "/" + pool }

// sliceByPool is the index function of slicesByPoolIndex.
func sliceByPool(obj any) ([]string, error) {
	s, ok := obj.(*resourceapi.ResourceSlice)
	if !ok {
		return nil, fmt.Errorf("indexing slices by pool: unexpected object %T", obj)
	}
	return []string{poolIndexKey(s.Spec.Driver, s.Spec.Pool.Name)}, nil
}

// taintRuleByPool is the index function of taintRulesByPoolIndex.
func taintRuleByPool(obj any) ([]string, error) {
	r, ok := obj.(*resourceapi.DeviceTaintRule)
	if !ok {
		return nil, fmt.Errorf("indexing DeviceTaintRules by pool: unexpected object %T", obj)
	}
	sel := r.Spec.DeviceSelector
	if sel == nil {
		return nil, nil
	}
	driver, pool := anyKey, anyKey
	if sel.Driver != nil {
		driver = *sel.Driver
	}
	if sel.Pool != nil {
		pool = *sel.Pool
	}
	return []string{poolIndexKey(driver, pool)}, nil
}

// addIndexer adds index to inf unless it has it (a second profile's plugin
// shares the informer). client-go re-indexes a started informer's store.
func addIndexer(inf cache.SharedIndexInformer, name string, f cache.IndexFunc) error {
	if _, ok := inf.GetIndexer().GetIndexers()[name]; ok {
		return nil
	}
	if err := inf.AddIndexers(cache.Indexers{name: f}); err != nil {
		return fmt.Errorf("adding index %s: %w", name, err)
	}
	return nil
}

// poolDevices reads the devices of a few pools as the scheduler's slice
// tracker shows them: the published slices with the DeviceTaintRules that
// select them applied, the way the tracker applies them (a rule's taint is
// appended to each device its driver, pool and device name select).
type poolDevices struct {
	slices cache.Indexer
	// rules is nil when DeviceTaintRules are off: the tracker then lists
	// the slices as published.
	rules cache.Indexer
}

// newPoolDevices indexes the slice informer and, when rules is not nil,
// the DeviceTaintRule informer.
func newPoolDevices(slices, rules cache.SharedIndexInformer) (*poolDevices, error) {
	if err := addIndexer(slices, slicesByPoolIndex, sliceByPool); err != nil {
		return nil, err
	}
	p := &poolDevices{slices: slices.GetIndexer()}
	if rules != nil {
		if err := addIndexer(rules, taintRulesByPoolIndex, taintRuleByPool); err != nil {
			return nil, err
		}
		p.rules = rules.GetIndexer()
	}
	return p, nil
}

// devices returns the devices of the pools of ids by ID, tainted by the
// rules that select them. The objects in the informers' stores are shared:
// a device a rule taints is copied, with a taint list of its own.
func (p *poolDevices) devices(ids []structured.DeviceID) (map[structured.DeviceID]*resourceapi.Device, error) {
	out := map[structured.DeviceID]*resourceapi.Device{}
	done := map[string]bool{}
	for _, id := range ids {
		driver, pool := id.Driver.String(), id.Pool.String()
		key := poolIndexKey(driver, pool)
		if done[key] {
			continue
		}
		done[key] = true
		objs, err := p.slices.ByIndex(slicesByPoolIndex, key)
		if err != nil {
			return nil, fmt.Errorf("slices of pool %s: %w", key, err)
		}
		rules, err := p.rulesFor(driver, pool)
		if err != nil {
			return nil, err
		}
		for _, obj := range objs {
			s, ok := obj.(*resourceapi.ResourceSlice)
			if !ok {
				continue
			}
			for i := range s.Spec.Devices {
				d := taintedDevice(&s.Spec.Devices[i], rules)
				out[structured.MakeDeviceID(driver, pool, d.Name)] = d
			}
		}
	}
	return out, nil
}

// rulesFor returns the DeviceTaintRules whose selector admits the pool.
func (p *poolDevices) rulesFor(driver, pool string) ([]*resourceapi.DeviceTaintRule, error) {
	if p.rules == nil {
		return nil, nil
	}
	var out []*resourceapi.DeviceTaintRule
	for _, key := range []string{poolIndexKey(driver, pool), poolIndexKey(driver, anyKey), poolIndexKey(anyKey, pool), poolIndexKey(anyKey, anyKey)} {
		objs, err := p.rules.ByIndex(taintRulesByPoolIndex, key)
		if err != nil {
			return nil, fmt.Errorf("DeviceTaintRules of pool %s/%s: %w", driver, pool, err)
		}
		for _, obj := range objs {
			if r, ok := obj.(*resourceapi.DeviceTaintRule); ok {
				out = append(out, r)
			}
		}
	}
	return out, nil
}

// taintedDevice is d with the taints of the rules that name it (or no
// device), d itself when none does.
func taintedDevice(d *resourceapi.Device, rules []*resourceapi.DeviceTaintRule) *resourceapi.Device {
	out := d
	for _, r := range rules {
		if name := r.Spec.DeviceSelector.Device; name != nil && *name != d.Name {
			continue
		}
		if out == d {
			c := *d
			c.Taints = slices.Clone(d.Taints)
			out = &c
		}
		out.Taints = append(out.Taints, r.Spec.Taint)
	}
	return out
}
