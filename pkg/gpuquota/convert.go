package gpuquota

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	rotav1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
)

// FromObject converts what a dynamic informer or client returns.
func FromObject(obj any) (*rotav1.GPUQuota, error) {
	switch o := obj.(type) {
	case *rotav1.GPUQuota:
		return o, nil
	case *unstructured.Unstructured:
		var q rotav1.GPUQuota
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &q); err != nil {
			return nil, fmt.Errorf("decoding GPUQuota %s: %w", o.GetName(), err)
		}
		return &q, nil
	default:
		return nil, fmt.Errorf("unexpected object %T where a GPUQuota was expected", obj)
	}
}

// ToUnstructured converts for the dynamic client.
func ToUnstructured(q *rotav1.GPUQuota) (*unstructured.Unstructured, error) {
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(q)
	if err != nil {
		return nil, fmt.Errorf("encoding GPUQuota %s: %w", q.Name, err)
	}
	u := &unstructured.Unstructured{Object: obj}
	u.SetAPIVersion(rotav1.SchemeGroupVersion.String())
	u.SetKind("GPUQuota")
	return u, nil
}
