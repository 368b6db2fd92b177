package forecast

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"

	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/pkg/schedule/validation"
)

// Sources are where ReadCluster reads schedules and their workloads; a nil
// field reads through the clients ReadCluster is given.
type Sources struct {
	Schedules ScheduleReader
	Workloads WorkloadReader
}

// ScheduleReader reads the DeploySchedules a forecast covers: the valid
// ones, and one message per invalid one (left out). The schedules returned
// are read only: they may be shared with a cache.
type ScheduleReader interface {
	ValidSchedules(ctx context.Context) (valid []*v1alpha1.DeploySchedule, invalid []string, err error)
}

// APISchedules lists every DeploySchedule through the dynamic client.
type APISchedules struct {
	Dynamic dynamic.Interface
}

// ValidSchedules implements ScheduleReader.
func (a APISchedules) ValidSchedules(ctx context.Context) ([]*v1alpha1.DeploySchedule, []string, error) {
	ul, err := a.Dynamic.Resource(v1alpha1.DeploySchedulesResource).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("list DeploySchedules: %w", err)
	}
	var valid []*v1alpha1.DeploySchedule
	var invalid []string
	for i := range ul.Items {
		ds, msg, err := DecodeSchedule(&ul.Items[i])
		if err != nil {
			return nil, nil, err
		}
		if msg != "" {
			invalid = append(invalid, msg)
			continue
		}
		valid = append(valid, ds)
	}
	return valid, invalid, nil
}

// DecodeSchedule decodes and validates a DeploySchedule. An invalid one
// comes back as a message saying why, and no schedule.
func DecodeSchedule(u *unstructured.Unstructured) (*v1alpha1.DeploySchedule, string, error) {
	var ds v1alpha1.DeploySchedule
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &ds); err != nil {
		return nil, "", fmt.Errorf("decode DeploySchedule %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	if errs := validation.ValidateDeploySchedule(&ds); len(errs) > 0 {
		return nil, InvalidScheduleMessage(ds.Namespace, ds.Name, errs), nil
	}
	return &ds, "", nil
}

// InvalidScheduleMessage is how a forecast names the invalid schedule
// namespace/name it left out: a reader that caches validation gives the
// message DecodeSchedule gives.
func InvalidScheduleMessage(namespace, name string, errs field.ErrorList) string {
	return fmt.Sprintf("DeploySchedule %s/%s: invalid: %v", namespace, name, errs.ToAggregate())
}

// WorkloadReader reads the Deployments and StatefulSets that schedules
// target. A missing one is an error for which apierrors.IsNotFound is true.
// The objects returned are read only: they may be an informer's.
type WorkloadReader interface {
	Deployment(ctx context.Context, namespace, name string) (*appsv1.Deployment, error)
	StatefulSet(ctx context.Context, namespace, name string) (*appsv1.StatefulSet, error)
}

// APIWorkloads reads each workload with a GET: for a one-off forecast
// (kubectl rota forecast) that runs no informers.
type APIWorkloads struct {
	Client kubernetes.Interface
}

// Deployment implements WorkloadReader.
func (a APIWorkloads) Deployment(ctx context.Context, namespace, name string) (*appsv1.Deployment, error) {
	return a.Client.AppsV1().Deployments(namespace).Get(ctx, name, metav1.GetOptions{})
}

// StatefulSet implements WorkloadReader.
func (a APIWorkloads) StatefulSet(ctx context.Context, namespace, name string) (*appsv1.StatefulSet, error) {
	return a.Client.AppsV1().StatefulSets(namespace).Get(ctx, name, metav1.GetOptions{})
}

// CachedWorkloads reads workloads from informer caches: a controller that
// forecasts again every period reads no workload from the API server.
type CachedWorkloads struct {
	Deployments  appslisters.DeploymentLister
	StatefulSets appslisters.StatefulSetLister
}

// Deployment implements WorkloadReader.
func (c CachedWorkloads) Deployment(_ context.Context, namespace, name string) (*appsv1.Deployment, error) {
	return c.Deployments.Deployments(namespace).Get(name)
}

// StatefulSet implements WorkloadReader.
func (c CachedWorkloads) StatefulSet(_ context.Context, namespace, name string) (*appsv1.StatefulSet, error) {
	return c.StatefulSets.StatefulSets(namespace).Get(name)
}
