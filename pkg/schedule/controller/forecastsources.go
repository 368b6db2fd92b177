package controller

import (
	"context"
	"fmt"
	"sort"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/pkg/schedule/forecast"
)

// informerSchedules is the forecast's ScheduleReader on the controller's
// DeploySchedule informer: no list from the API server, and a schedule is
// decoded and validated again only when its resourceVersion changed since
// the previous forecast. Not safe for concurrent use (the forecaster holds
// its lock around a read).
type informerSchedules struct {
	store cache.Store
	// decoded is the previous forecast's schedules by UID.
	decoded map[types.UID]decodedSchedule
}

type decodedSchedule struct {
	resourceVersion string
	ds              *v1alpha1.DeploySchedule // nil when invalid
	invalid         string
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
	decoded := make(map[types.UID]decodedSchedule, len(items))
	var valid []*v1alpha1.DeploySchedule
	var invalid []string
	for _, u := range items {
		d, ok := s.decoded[u.GetUID()]
		if !ok || d.resourceVersion != u.GetResourceVersion() || d.resourceVersion == "" {
			ds, msg, err := forecast.DecodeSchedule(u)
			if err != nil {
				return nil, nil, err
			}
			d = decodedSchedule{resourceVersion: u.GetResourceVersion(), ds: ds, invalid: msg}
		}
		decoded[u.GetUID()] = d
		if d.ds == nil {
			invalid = append(invalid, d.invalid)
			continue
		}
		valid = append(valid, d.ds)
	}
	s.decoded = decoded
	return valid, invalid, nil
}
