package forecast

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
)

// ReadCluster reads what a forecast needs from the API: every valid
// DeploySchedule, its targets' Deployments and StatefulSets with the
// ResourceClaimTemplates their pods use, GPUReservations, nodes,
// ResourceSlices, DeviceClasses, and pods with their claims. Invalid
// schedules are left out and returned by name in skipped, as are targets
// of a kind the forecast does not read (LeaderWorkerSet). src says where
// schedules and workloads are read from; its zero value reads them through
// the clients.
func ReadCluster(ctx context.Context, client kubernetes.Interface, dyn dynamic.Interface, src Sources) (o Objects, skipped []string, err error) {
	if src.Workloads == nil {
		src.Workloads = APIWorkloads{Client: client}
	}
	if src.Schedules == nil {
		src.Schedules = APISchedules{Dynamic: dyn}
	}
	valid, skipped, err := src.Schedules.ValidSchedules(ctx)
	if err != nil {
		return o, nil, err
	}
	templates := map[string]bool{}
	for _, ds := range valid {
		o.Schedules = append(o.Schedules, ds)
		for _, t := range ds.Spec.Targets {
			w, err := readWorkload(ctx, src.Workloads, ds.Namespace, t.WorkloadRef)
			if err != nil && !apierrors.IsNotFound(err) {
				return o, nil, err
			}
			if w == nil {
				skipped = append(skipped, fmt.Sprintf("DeploySchedule %s/%s target %s: %s %s not read", ds.Namespace, ds.Name, t.Name, t.WorkloadRef.Kind, t.WorkloadRef.Name))
				continue
			}
			o.Workloads = append(o.Workloads, *w)
			for _, rc := range w.Template.Spec.ResourceClaims {
				if name := rc.ResourceClaimTemplateName; name != nil && !templates[ds.Namespace+"/"+*name] {
					templates[ds.Namespace+"/"+*name] = true
					t, err := client.ResourceV1().ResourceClaimTemplates(ds.Namespace).Get(ctx, *name, metav1.GetOptions{})
					if err != nil && !apierrors.IsNotFound(err) {
						return o, nil, fmt.Errorf("get ResourceClaimTemplate %s/%s: %w", ds.Namespace, *name, err)
					}
					if err == nil {
						o.Templates = append(o.Templates, t)
					}
				}
			}
		}
	}
	if err := readNamespaces(ctx, client, &o); err != nil {
		return o, nil, err
	}
	if err := readPool(ctx, client, dyn, &o); err != nil {
		return o, nil, err
	}
	return o, skipped, nil
}

// readNamespaces lists the Services and ResourceQuotas of the schedules'
// namespaces.
func readNamespaces(ctx context.Context, client kubernetes.Interface, o *Objects) error {
	seen := map[string]bool{}
	for _, ds := range o.Schedules {
		if seen[ds.Namespace] {
			continue
		}
		seen[ds.Namespace] = true
		svcs, err := client.CoreV1().Services(ds.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return fmt.Errorf("list Services of %s: %w", ds.Namespace, err)
		}
		for i := range svcs.Items {
			o.Services = append(o.Services, &svcs.Items[i])
		}
		quotas, err := client.CoreV1().ResourceQuotas(ds.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return fmt.Errorf("list ResourceQuotas of %s: %w", ds.Namespace, err)
		}
		for i := range quotas.Items {
			o.Quotas = append(o.Quotas, &quotas.Items[i])
		}
	}
	return nil
}

// readWorkload reads a Deployment or StatefulSet; nil for another kind.
// The objects it returns may be shared with an informer cache: read only.
func readWorkload(ctx context.Context, workloads WorkloadReader, ns string, ref v1alpha1.WorkloadReference) (*Workload, error) {
	w := &Workload{Namespace: ns, Kind: ref.Kind, Name: ref.Name}
	var sel *metav1.LabelSelector
	switch ref.Kind {
	case "Deployment":
		d, err := workloads.Deployment(ctx, ns, ref.Name)
		if err != nil {
			return nil, fmt.Errorf("read Deployment %s/%s: %w", ns, ref.Name, err)
		}
		w.Replicas, w.Template, w.Annotations, sel = d.Spec.Replicas, &d.Spec.Template, d.Annotations, d.Spec.Selector
	case "StatefulSet":
		s, err := workloads.StatefulSet(ctx, ns, ref.Name)
		if err != nil {
			return nil, fmt.Errorf("read StatefulSet %s/%s: %w", ns, ref.Name, err)
		}
		w.Replicas, w.Template, w.Annotations, sel = s.Spec.Replicas, &s.Spec.Template, s.Annotations, s.Spec.Selector
	default:
		return nil, nil
	}
	if sel != nil {
		s, err := metav1.LabelSelectorAsSelector(sel)
		if err != nil {
			return nil, fmt.Errorf("%s %s/%s: selector: %w", ref.Kind, ns, ref.Name, err)
		}
		w.Selector = s
	}
	return w, nil
}

// readPool lists the reservations, nodes, slices, classes, pods and claims.
func readPool(ctx context.Context, client kubernetes.Interface, dyn dynamic.Interface, o *Objects) error {
	rl, err := dyn.Resource(v1alpha1.GPUReservationsResource).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list GPUReservations: %w", err)
	}
	for i := range rl.Items {
		var r v1alpha1.GPUReservation
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(rl.Items[i].Object, &r); err != nil {
			return fmt.Errorf("decode GPUReservation %s/%s: %w", rl.Items[i].GetNamespace(), rl.Items[i].GetName(), err)
		}
		o.Reservations = append(o.Reservations, &r)
	}
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list Nodes: %w", err)
	}
	for i := range nodes.Items {
		o.Nodes = append(o.Nodes, &nodes.Items[i])
	}
	slices, err := client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list ResourceSlices: %w", err)
	}
	for i := range slices.Items {
		o.Slices = append(o.Slices, &slices.Items[i])
	}
	classes, err := client.ResourceV1().DeviceClasses().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list DeviceClasses: %w", err)
	}
	for i := range classes.Items {
		o.Classes = append(o.Classes, &classes.Items[i])
	}
	pods, err := client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list Pods: %w", err)
	}
	for i := range pods.Items {
		o.Pods = append(o.Pods, &pods.Items[i])
	}
	claims, err := client.ResourceV1().ResourceClaims("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list ResourceClaims: %w", err)
	}
	for i := range claims.Items {
		o.Claims = append(o.Claims, &claims.Items[i])
	}
	return nil
}
