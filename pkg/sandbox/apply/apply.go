// Package apply applies Kubernetes manifests with server-side apply, as
// kubectl apply --server-side does, for the sandbox and its tests.
package apply

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
)

// FieldManager owns what the sandbox applies.
const FieldManager = "rota-sandbox"

// Applier applies manifests with server-side apply, as kubectl apply
// --server-side does.
type Applier struct {
	dyn    dynamic.Interface
	mapper *restmapper.DeferredDiscoveryRESTMapper
}

// NewApplier talks to the API server of cfg.
func NewApplier(cfg *rest.Config) (*Applier, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("discovery client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("dynamic client: %w", err)
	}
	return &Applier{dyn: dyn, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))}, nil
}

// ApplyFile applies every object of a YAML file.
func (a *Applier) ApplyFile(ctx context.Context, path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read manifest: %w", err)
	}
	if err := a.ApplyYAML(ctx, data); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// ApplyYAML applies every object of a multi-document YAML (or JSON) stream.
func (a *Applier) ApplyYAML(ctx context.Context, data []byte) error {
	objs, err := DecodeObjects(data)
	if err != nil {
		return err
	}
	for _, obj := range objs {
		if err := a.Apply(ctx, obj, false); err != nil {
			return err
		}
	}
	return nil
}

// DecodeObjects splits a YAML stream into objects, skipping empty documents.
func DecodeObjects(data []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var objs []*unstructured.Unstructured
	for i := 0; ; i++ {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, fmt.Errorf("document %d: %w", i+1, err)
		}
		if len(m) == 0 {
			continue
		}
		obj := &unstructured.Unstructured{Object: m}
		if obj.GetAPIVersion() == "" || obj.GetKind() == "" {
			return nil, fmt.Errorf("document %d: apiVersion and kind are required", i+1)
		}
		if obj.GetName() == "" {
			return nil, fmt.Errorf("document %d (%s): metadata.name: Required value", i+1, obj.GetKind())
		}
		objs = append(objs, obj)
	}
}

// resource finds the REST resource of a kind, refreshing discovery once for
// kinds it does not know yet (CRDs installed a moment ago).
func (a *Applier) resource(gvk schema.GroupVersionKind, namespace string) (dynamic.ResourceInterface, error) {
	m, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		a.mapper.Reset()
		m, err = a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	if err != nil {
		return nil, fmt.Errorf("kind %s: %w", gvk, err)
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		if namespace == "" {
			namespace = metav1.NamespaceDefault
		}
		return a.dyn.Resource(m.Resource).Namespace(namespace), nil
	}
	return a.dyn.Resource(m.Resource), nil
}

// Apply applies one object; dryRun asks the server to validate and admit it
// without persisting.
func (a *Applier) Apply(ctx context.Context, obj *unstructured.Unstructured, dryRun bool) error {
	ri, err := a.resource(obj.GroupVersionKind(), obj.GetNamespace())
	if err != nil {
		return err
	}
	opts := metav1.ApplyOptions{FieldManager: FieldManager, Force: true}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	if _, err := ri.Apply(ctx, obj.GetName(), obj, opts); err != nil {
		return fmt.Errorf("apply %s %s: %w", obj.GetKind(), objectName(obj.GetNamespace(), obj.GetName()), err)
	}
	return nil
}

// Delete deletes one object; grace is the grace period in seconds, nil for
// the object's default.
func (a *Applier) Delete(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string, grace *int64) error {
	ri, err := a.resource(gvk, namespace)
	if err != nil {
		return err
	}
	if err := ri.Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: grace}); err != nil {
		return fmt.Errorf("delete %s %s: %w", gvk.Kind, objectName(namespace, name), err)
	}
	return nil
}

func objectName(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}
