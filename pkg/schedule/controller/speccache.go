package controller

import (
	"fmt"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/pkg/schedule"
	"github.com/rota-dev/rota/pkg/schedule/forecast"
	"github.com/rota-dev/rota/pkg/schedule/validation"
)

// specCache holds, per DeploySchedule (by UID), what one generation of its
// spec gives: the validation errors, the compiled schedule and the copy
// the capacity forecast reads. The passes and the forecast both read
// through it, so a schedule is decoded and validated once per generation
// for both: a status write (status is a subresource: a new
// resourceVersion, the same generation) makes neither do it again. An
// object without a UID or a generation (a fake client's) is never cached:
// nothing tells its next spec from this one.
//
// Its lock is held only to look an entry up or store it, never while
// validating or calling out: passes take it from the workers, the
// forecast from under the forecaster's lock.
type specCache struct {
	// validate is validation.ValidateDeploySchedule; tests count its calls.
	validate func(*v1alpha1.DeploySchedule) field.ErrorList

	mu sync.Mutex
	m  map[types.UID]specEntry
}

// specEntry is one generation of a schedule. Validation reads only the
// name, the namespace and the spec, compilation only the spec, so both
// hold until the generation changes.
type specEntry struct {
	generation int64
	// invalid are the spec's validation errors; spec and compiled are nil
	// then.
	invalid field.ErrorList
	// spec is the schedule's name, namespace, UID, generation and spec,
	// with no other metadata and no status: all the forecast reads of a
	// schedule. Shared, read only.
	spec *v1alpha1.DeploySchedule
	// compiled is nil until a pass compiles this generation (the forecast
	// compiles on its own).
	compiled *schedule.Schedule
}

func newSpecCache() *specCache {
	return &specCache{validate: validation.ValidateDeploySchedule, m: map[types.UID]specEntry{}}
}

func cacheable(uid types.UID, generation int64) bool {
	return uid != "" && generation != 0
}

// lookup returns the entry of the schedule uid at generation.
func (c *specCache) lookup(uid types.UID, generation int64) (specEntry, bool) {
	if !cacheable(uid, generation) {
		return specEntry{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[uid]
	return e, ok && e.generation == generation
}

// store keeps e for uid unless a newer generation is there already (a
// slower reader of an older copy must not replace it). Of the same
// generation, a compiled schedule already stored is kept.
func (c *specCache) store(uid types.UID, e specEntry) {
	if !cacheable(uid, e.generation) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if cur, ok := c.m[uid]; ok {
		if cur.generation > e.generation {
			return
		}
		if cur.generation == e.generation && e.compiled == nil {
			e.compiled = cur.compiled
		}
	}
	c.m[uid] = e
}

// forget drops a deleted schedule.
func (c *specCache) forget(uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, uid)
}

// retain drops every schedule but those in keep: the forecast's list of
// all schedules drops one whose delete raced with a read that stored it
// again.
func (c *specCache) retain(keep map[types.UID]bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for uid := range c.m {
		if !keep[uid] {
			delete(c.m, uid)
		}
	}
}

// compile returns the schedule's validation errors (nothing compiled
// then), or its compiled form; err is a failed compilation.
func (c *specCache) compile(ds *v1alpha1.DeploySchedule) (*schedule.Schedule, field.ErrorList, error) {
	e, ok := c.lookup(ds.UID, ds.Generation)
	if !ok {
		e = specEntry{generation: ds.Generation, invalid: c.validate(ds)}
		if len(e.invalid) == 0 && cacheable(ds.UID, ds.Generation) {
			// The pass changes its copy's status, never its spec; the
			// forecast's copy is its own all the same.
			e.spec = identityAndSpec(ds, *ds.Spec.DeepCopy())
		}
	}
	if len(e.invalid) > 0 {
		if !ok {
			c.store(ds.UID, e)
		}
		return nil, e.invalid, nil
	}
	if e.compiled == nil {
		s, err := schedule.Compile(ds)
		if err != nil {
			if !ok {
				c.store(ds.UID, e)
			}
			return nil, nil, fmt.Errorf("compile: %w", err)
		}
		e.compiled = s
		c.store(ds.UID, e)
	}
	return e.compiled, nil, nil
}

// forForecast returns the schedule in u as the forecast reads it, or, when
// it is invalid, the message that names it in the forecast.
func (c *specCache) forForecast(u *unstructured.Unstructured) (*v1alpha1.DeploySchedule, string, error) {
	uid, generation := u.GetUID(), u.GetGeneration()
	e, ok := c.lookup(uid, generation)
	if !ok {
		var ds v1alpha1.DeploySchedule
		if err := fromUnstructured(u, &ds); err != nil {
			return nil, "", err
		}
		e = specEntry{generation: generation, invalid: c.validate(&ds)}
		if len(e.invalid) == 0 {
			if !cacheable(uid, generation) {
				return &ds, "", nil
			}
			e.spec = identityAndSpec(&ds, ds.Spec) // ds is this read's own
		}
		c.store(uid, e)
	}
	if len(e.invalid) > 0 {
		return nil, forecast.InvalidScheduleMessage(u.GetNamespace(), u.GetName(), e.invalid), nil
	}
	return e.spec, "", nil
}

// identityAndSpec is ds with spec and no other metadata nor status.
func identityAndSpec(ds *v1alpha1.DeploySchedule, spec v1alpha1.DeployScheduleSpec) *v1alpha1.DeploySchedule {
	return &v1alpha1.DeploySchedule{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "DeploySchedule"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ds.Namespace, Name: ds.Name, UID: ds.UID, Generation: ds.Generation},
		Spec:       spec,
	}
}
