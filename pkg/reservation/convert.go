package reservation

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	rotav1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
)

// FromObject converts what a dynamic informer or client returns.
func FromObject(obj any) (*rotav1.GPUReservation, error) {
	switch o := obj.(type) {
	case *rotav1.GPUReservation:
		return o, nil
	case *unstructured.Unstructured:
		var res rotav1.GPUReservation
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &res); err != nil {
			return nil, fmt.Errorf("decoding GPUReservation %s/%s: %w", o.GetNamespace(), o.GetName(), err)
		}
		return &res, nil
	default:
		return nil, fmt.Errorf("unexpected object %T where a GPUReservation was expected", obj)
	}
}

// ToUnstructured converts for the dynamic client.
func ToUnstructured(res *rotav1.GPUReservation) (*unstructured.Unstructured, error) {
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(res)
	if err != nil {
		return nil, fmt.Errorf("encoding GPUReservation %s/%s: %w", res.Namespace, res.Name, err)
	}
	u := &unstructured.Unstructured{Object: obj}
	u.SetAPIVersion(rotav1.SchemeGroupVersion.String())
	u.SetKind("GPUReservation")
	return u, nil
}
