package controller

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"

	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
)

// schedules reads and writes DeploySchedules as typed objects over the
// dynamic client (the project has no generated clientset).
type schedules struct {
	dyn dynamic.Interface
}

func fromUnstructured[T any](u *unstructured.Unstructured, out *T) error {
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out); err != nil {
		return fmt.Errorf("decode %s %s/%s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
	}
	return nil
}

func (s schedules) get(ctx context.Context, namespace, name string) (*v1alpha1.DeploySchedule, error) {
	u, err := s.dyn.Resource(v1alpha1.DeploySchedulesResource).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get DeploySchedule %s/%s: %w", namespace, name, err)
	}
	var ds v1alpha1.DeploySchedule
	return &ds, fromUnstructured(u, &ds)
}

func (s schedules) list(ctx context.Context, namespace string, opts metav1.ListOptions) (*v1alpha1.DeployScheduleList, error) {
	ul, err := s.dyn.Resource(v1alpha1.DeploySchedulesResource).Namespace(namespace).List(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("list DeploySchedules: %w", err)
	}
	out := &v1alpha1.DeployScheduleList{}
	out.ResourceVersion = ul.GetResourceVersion()
	out.Continue = ul.GetContinue()
	out.Items = make([]v1alpha1.DeploySchedule, len(ul.Items))
	for i := range ul.Items {
		if err := fromUnstructured(&ul.Items[i], &out.Items[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// updateStatus writes ds.Status with ds's resourceVersion (compare-and-swap)
// and returns the stored object.
func (s schedules) updateStatus(ctx context.Context, ds *v1alpha1.DeploySchedule) (*v1alpha1.DeploySchedule, error) {
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ds)
	if err != nil {
		return nil, fmt.Errorf("encode DeploySchedule %s/%s: %w", ds.Namespace, ds.Name, err)
	}
	u := &unstructured.Unstructured{Object: obj}
	u.SetAPIVersion(v1alpha1.SchemeGroupVersion.String())
	u.SetKind("DeploySchedule")
	got, err := s.dyn.Resource(v1alpha1.DeploySchedulesResource).Namespace(ds.Namespace).UpdateStatus(ctx, u, metav1.UpdateOptions{})
	if err != nil {
		return nil, fmt.Errorf("update status of DeploySchedule %s/%s: %w", ds.Namespace, ds.Name, err)
	}
	var out v1alpha1.DeploySchedule
	return &out, fromUnstructured(got, &out)
}

// listWatch turns the dynamic client into a typed ListerWatcher.
func (s schedules) listWatch() *cache.ListWatch {
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return s.list(ctx, metav1.NamespaceAll, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			w, err := s.dyn.Resource(v1alpha1.DeploySchedulesResource).Watch(ctx, opts)
			if err != nil {
				return nil, fmt.Errorf("watch DeploySchedules: %w", err)
			}
			return watch.Filter(w, func(e watch.Event) (watch.Event, bool) {
				u, ok := e.Object.(*unstructured.Unstructured)
				if !ok {
					return e, true
				}
				var ds v1alpha1.DeploySchedule
				if err := fromUnstructured(u, &ds); err != nil {
					return watch.Event{Type: watch.Error, Object: &metav1.Status{Message: err.Error()}}, true
				}
				e.Object = &ds
				return e, true
			}), nil
		},
	}
}

// getReservation reads a GPUReservation (status only is used).
func getReservation(ctx context.Context, dyn dynamic.Interface, namespace, name string) (*v1alpha1.GPUReservation, error) {
	u, err := dyn.Resource(v1alpha1.GPUReservationsResource).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get GPUReservation %s/%s: %w", namespace, name, err)
	}
	var r v1alpha1.GPUReservation
	return &r, fromUnstructured(u, &r)
}

// workloadKey identifies a workload across schedules of a namespace.
func workloadKey(namespace string, ref v1alpha1.WorkloadReference) string {
	return namespace + "/" + schema.FromAPIVersionAndKind(ref.APIVersion, ref.Kind).GroupKind().String() + "/" + ref.Name
}
