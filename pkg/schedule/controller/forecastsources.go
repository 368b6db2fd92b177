package controller

import (
	"context"
	"fmt"
	"sort"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
)

// informerSchedules is the forecast's ScheduleReader on the controller's
// DeploySchedule informer: no list from the API server, and a schedule is
// decoded and validated only for a generation that neither a pass nor an
// earlier forecast has seen (specCache). The schedules it returns carry
// their name, namespace, UID, generation and spec, and no status: the
// forecast reads nothing else of them.
type informerSchedules struct {
	store cache.Store
	specs *specCache
}

// ValidSchedules implements forecast.ScheduleReader, in namespace/name
// order as a list from the API server returns them.
func (s *informerSchedules) ValidSchedules(context.Context) ([]*v1alpha1.DeploySchedule, []string, error) {
	objs := s.store.List()
	items := make([]*unstructured.Unstructured, 0, len(objs))
	for _, obj := range objs {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return nil, nil, fmt.Errorf("the DeploySchedule informer holds a %T", obj)
		}
		items = append(items, u)
	}
	sort.Slice(items, func(i, j int) bool {
		if a, b := items[i].GetNamespace(), items[j].GetNamespace(); a != b {
			return a < b
		}
		return items[i].GetName() < items[j].GetName()
	})
	listed := make(map[types.UID]bool, len(items))
	var valid []*v1alpha1.DeploySchedule
	var invalid []string
	for _, u := range items {
		listed[u.GetUID()] = true
		ds, msg, err := s.specs.forForecast(u)
		if err != nil {
			return nil, nil, err
		}
		if ds == nil {
			invalid = append(invalid, msg)
			continue
		}
		valid = append(valid, ds)
	}
	s.specs.retain(listed)
	return valid, invalid, nil
}
