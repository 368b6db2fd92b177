package controller

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"

	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
)

// schedules reads and writes DeploySchedules as typed objects over the
// dynamic client (the project has no generated clientset), and notes in
// versions the resourceVersion of every schedule it reads or writes by
// name.
type schedules struct {
	dyn      dynamic.Interface
	versions *knownVersions
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
	s.versions.set(namespace+"/"+name, u.GetResourceVersion())
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
	key := ds.Namespace + "/" + ds.Name
	got, err := s.dyn.Resource(v1alpha1.DeploySchedulesResource).Namespace(ds.Namespace).UpdateStatus(ctx, u, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) {
		// Written by someone else since the read: the next read asks the API.
		s.versions.set(key, unknownVersion)
	}
	if err != nil {
		return nil, fmt.Errorf("update status of DeploySchedule %s/%s: %w", ds.Namespace, ds.Name, err)
	}
	s.versions.set(key, got.GetResourceVersion())
	var out v1alpha1.DeploySchedule
	return &out, fromUnstructured(got, &out)
}
