package controller

import (
	"context"
	"fmt"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
)

// knownVersions is, per schedule (namespace/name), the resourceVersion of
// the newest copy this controller has seen from the API server itself: the
// one its last status write returned, or its last GET. A pass reads its
// schedule from the DeploySchedule informer only when the cache holds that
// very version; otherwise the cache may be behind the controller's own
// write (its watch event not delivered yet) and a pass acting on it would
// plan again from a status one write behind — steps already submitted
// shown as planned, Events for phase changes already reported — so the
// pass reads the API instead. (Resource versions are compared for equality
// only: the API gives them no order.)
type knownVersions struct {
	mu sync.Mutex
	m  map[string]string
}

// unknownVersion marks a schedule whose last status write lost a
// compare-and-swap: someone else wrote it, and the next pass reads the API.
const unknownVersion = "\x00unknown"

func (k *knownVersions) get(key string) (string, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	v, ok := k.m[key]
	return v, ok
}

func (k *knownVersions) set(key, rv string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.m == nil {
		k.m = map[string]string{}
	}
	k.m[key] = rv
}

func (k *knownVersions) forget(key string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.m, key)
}

// readSchedule is the pass's read of its schedule: from the DeploySchedule
// informer when the controller has a synced one and the cache holds the
// version last seen from the API server (or none was seen: a schedule
// this controller has not written since it started), else with a GET. A
// schedule missing from the cache is gone: NotFound (its add event queues
// it again if it comes back).
func (c *Controller) readSchedule(ctx context.Context, namespace, name string) (*v1alpha1.DeploySchedule, error) {
	if c.informer == nil || !c.informer.HasSynced() {
		return c.schedules.get(ctx, namespace, name)
	}
	key := namespace + "/" + name
	obj, exists, err := c.informer.GetIndexer().GetByKey(key)
	if err != nil {
		return nil, fmt.Errorf("get DeploySchedule %s from the cache: %w", key, err)
	}
	if !exists {
		return nil, apierrors.NewNotFound(v1alpha1.DeploySchedulesResource.GroupResource(), name)
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("get DeploySchedule %s: the informer holds a %T", key, obj)
	}
	if known, ok := c.schedules.versions.get(key); ok && known != u.GetResourceVersion() {
		c.metrics.scheduleReads.WithLabelValues("api").Inc()
		return c.schedules.get(ctx, namespace, name)
	}
	c.metrics.scheduleReads.WithLabelValues("cache").Inc()
	// Decoding makes a copy: the pass may change it, the cache's stays.
	var ds v1alpha1.DeploySchedule
	if err := fromUnstructured(u, &ds); err != nil {
		return nil, err
	}
	return &ds, nil
}
