package app

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/pkg/driver/gpu"
	"github.com/rota-dev/rota/pkg/driver/resources"
	"github.com/rota-dev/rota/pkg/schedule/forecast"
	"github.com/rota-dev/rota/pkg/schedule/validation"
)

// readObjects reads every YAML document of the files: DeploySchedules
// (validated as the API server would), Deployments, StatefulSets,
// ResourceClaimTemplates, GPUReservations, Services, ResourceQuotas and
// DeviceClasses. Each problem
// is returned with its file and document.
func readObjects(files []string, objs *forecast.Objects) []error {
	var errs []error
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			errs = append(errs, fmt.Errorf("reading %s: %w", file, err))
			continue
		}
		docs, err := splitYAML(data)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", file, err))
			continue
		}
		for i, doc := range docs {
			for _, e := range decodeObject(doc, objs) {
				errs = append(errs, fmt.Errorf("%s: document %d: %w", file, i+1, e))
			}
		}
	}
	return errs
}

func splitYAML(data []byte) ([][]byte, error) {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var docs [][]byte
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading YAML: %w", err)
		}
		if len(bytes.TrimSpace(doc)) > 0 && strings.TrimSpace(stripComments(doc)) != "" {
			docs = append(docs, doc)
		}
	}
}

func stripComments(doc []byte) string {
	var b strings.Builder
	for _, line := range strings.Split(string(doc), "\n") {
		if t := strings.TrimSpace(line); t != "" && !strings.HasPrefix(t, "#") && t != "---" {
			b.WriteString(line)
		}
	}
	return b.String()
}

// decodeObject adds the object of one document to objs.
func decodeObject(doc []byte, objs *forecast.Objects) []error {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return []error{fmt.Errorf("reading YAML: %w", err)}
	}
	switch tm.Kind {
	case "DeploySchedule":
		ds, errs := validation.DecodeDeploySchedule(doc)
		if len(errs) > 0 {
			return errs
		}
		if fieldErrs := validation.ValidateDeploySchedule(ds); len(fieldErrs) > 0 {
			return fieldErrs.ToAggregate().Errors()
		}
		objs.Schedules = append(objs.Schedules, ds)
	case "Deployment":
		var d appsv1.Deployment
		if err := strict(doc, &d); err != nil {
			return []error{err}
		}
		objs.Workloads = append(objs.Workloads, forecast.Workload{Namespace: namespaceOf(d.Namespace), Kind: "Deployment", Name: d.Name,
			Replicas: d.Spec.Replicas, Template: &d.Spec.Template, Annotations: d.Annotations})
	case "StatefulSet":
		var s appsv1.StatefulSet
		if err := strict(doc, &s); err != nil {
			return []error{err}
		}
		objs.Workloads = append(objs.Workloads, forecast.Workload{Namespace: namespaceOf(s.Namespace), Kind: "StatefulSet", Name: s.Name,
			Replicas: s.Spec.Replicas, Template: &s.Spec.Template, Annotations: s.Annotations})
	case "ResourceClaimTemplate":
		var t resourceapi.ResourceClaimTemplate
		if err := strict(doc, &t); err != nil {
			return []error{err}
		}
		t.Namespace = namespaceOf(t.Namespace)
		objs.Templates = append(objs.Templates, &t)
	case "GPUReservation":
		var r v1alpha1.GPUReservation
		if err := strict(doc, &r); err != nil {
			return []error{err}
		}
		r.Namespace = namespaceOf(r.Namespace)
		objs.Reservations = append(objs.Reservations, &r)
	case "Service":
		var svc corev1.Service
		if err := strict(doc, &svc); err != nil {
			return []error{err}
		}
		svc.Namespace = namespaceOf(svc.Namespace)
		objs.Services = append(objs.Services, &svc)
	case "ResourceQuota":
		var q corev1.ResourceQuota
		if err := strict(doc, &q); err != nil {
			return []error{err}
		}
		q.Namespace = namespaceOf(q.Namespace)
		objs.Quotas = append(objs.Quotas, &q)
	case "DeviceClass":
		var c resourceapi.DeviceClass
		if err := strict(doc, &c); err != nil {
			return []error{err}
		}
		objs.Classes = append(objs.Classes, &c)
	default:
		return []error{fmt.Errorf("kind: Unsupported value: %q: supported values: DeploySchedule, Deployment, StatefulSet, ResourceClaimTemplate, GPUReservation, Service, ResourceQuota, DeviceClass", tm.Kind)}
	}
	return nil
}

func namespaceOf(ns string) string {
	if ns == "" {
		return metav1.NamespaceDefault
	}
	return ns
}

// strict decodes doc into obj; unknown or duplicate fields are errors.
func strict(doc []byte, obj any) error {
	data, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return fmt.Errorf("reading YAML: %w", err)
	}
	strictErrs, err := sigsjson.UnmarshalStrict(data, obj, sigsjson.DisallowUnknownFields)
	if err != nil {
		return fmt.Errorf("decoding: %w", err)
	}
	return errors.Join(strictErrs...)
}

// poolSlices publishes, for each NAME=PROFILE of --node, what the driver
// publishes on a node with that mock profile (dgx-h100, h100:8, ...).
func poolSlices(nodes []string) ([]*resourceapi.ResourceSlice, []error) {
	var out []*resourceapi.ResourceSlice
	var errs []error
	seen := map[string]bool{}
	for _, n := range nodes {
		name, profile, ok := strings.Cut(n, "=")
		if !ok || name == "" {
			errs = append(errs, fmt.Errorf("--node: Invalid value: %q: want NAME=PROFILE, such as gpu-node-0=h100:8 or node-a=dgx-h100", n))
			continue
		}
		if seen[name] {
			errs = append(errs, fmt.Errorf("--node: Duplicate value: %q", name))
			continue
		}
		seen[name] = true
		s, err := nodeSlice(name, profile)
		if err != nil {
			errs = append(errs, fmt.Errorf("--node: Invalid value: %q: %w", n, err))
			continue
		}
		out = append(out, s)
	}
	return out, errs
}

func nodeSlice(node, profile string) (*resourceapi.ResourceSlice, error) {
	m, err := gpu.NewMock(node, profile, clock.RealClock{})
	if err != nil {
		return nil, err
	}
	if err := gpu.Init(m); err != nil {
		return nil, err
	}
	inv, err := gpu.Discover(m)
	if err != nil {
		return nil, err
	}
	res, err := resources.ForNode(node, &inv, nil, resources.Options{})
	if err != nil {
		return nil, err
	}
	s := &resourceapi.ResourceSlice{}
	s.Name = node + "-" + gpuv1.DriverName
	s.Spec = resourceapi.ResourceSliceSpec{Driver: gpuv1.DriverName, NodeName: ptr.To(node),
		Pool:    resourceapi.ResourcePool{Name: node, ResourceSliceCount: 1},
		Devices: res.Pools[node].Slices[0].Devices}
	return s, nil
}

// defaultClass is the DeviceClass manifests/ installs for every GPU of the
// driver, used when the files name none.
func defaultClass() *resourceapi.DeviceClass {
	c := &resourceapi.DeviceClass{}
	c.Name = gpuv1.DeviceClassName
	c.Spec.Selectors = []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
		Expression: fmt.Sprintf("device.driver == %q", gpuv1.DriverName)}}}
	return c
}
