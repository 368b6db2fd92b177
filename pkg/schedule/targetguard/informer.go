package targetguard

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	rotav1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
)

// Informer is the Guard's own cache of DeploySchedules. Every replica of
// the controller runs one from start-up, leader or not, since the API
// server may send a review to any of them.
type Informer struct {
	informer cache.SharedIndexInformer
}

// NewInformer returns a DeploySchedule cache over dyn; Run starts it.
func NewInformer(dyn dynamic.Interface) *Informer {
	inf := dynamicinformer.NewFilteredDynamicInformer(dyn, rotav1.DeploySchedulesResource, "", 0,
		cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}, nil)
	return &Informer{informer: inf.Informer()}
}

// Run fills the cache and keeps it current until ctx ends.
func (i *Informer) Run(ctx context.Context) { i.informer.RunWithContext(ctx) }

// HasSynced reports whether the first list has been read.
func (i *Informer) HasSynced() bool { return i.informer.HasSynced() }

var errNotSynced = errors.New("the DeploySchedule cache has not synced yet")

// InNamespace implements Schedules.
func (i *Informer) InNamespace(namespace string) ([]*rotav1.DeploySchedule, error) {
	if !i.informer.HasSynced() {
		return nil, errNotSynced
	}
	objs, err := i.informer.GetIndexer().ByIndex(cache.NamespaceIndex, namespace)
	if err != nil {
		return nil, fmt.Errorf("index: %w", err)
	}
	out := make([]*rotav1.DeploySchedule, 0, len(objs))
	for _, o := range objs {
		u, ok := o.(*unstructured.Unstructured)
		if !ok {
			return nil, fmt.Errorf("unexpected %T in the DeploySchedule cache", o)
		}
		var ds rotav1.DeploySchedule
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &ds); err != nil {
			return nil, fmt.Errorf("DeploySchedule %s/%s: %w", u.GetNamespace(), u.GetName(), err)
		}
		out = append(out, &ds)
	}
	return out, nil
}
