package preflight

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	rotav1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
)

// The objects of the shipped manifests the checks look for.
const (
	schedulerDeployment  = "rota-scheduler"
	controllerDeployment = "rota-schedule-controller"
	driverDaemonSet      = "rota-dra-kubelet-plugin"
	installFix           = "install Rota (docs/install.md): kubectl apply --server-side -f rota.yaml"
)

func (c checker) resourceAPI() Result {
	return c.served("DRA API", resourceapi.SchemeGroupVersion.String(),
		[]string{"deviceclasses", "resourceclaims", "resourceclaimtemplates", "resourceslices", "devicetaintrules"},
		"Rota needs Kubernetes 1.37 with resource.k8s.io/v1 served: upgrade the control plane, and check that kube-apiserver's --runtime-config does not turn resource.k8s.io/v1 off")
}

func (c checker) admissionAPI() Result {
	return c.served("Admission policy API", "admissionregistration.k8s.io/v1",
		[]string{"validatingadmissionpolicies", "validatingadmissionpolicybindings", "mutatingadmissionpolicies", "mutatingadmissionpolicybindings"},
		"Rota's tenant-isolation policies (docs/security.md) are Validating- and MutatingAdmissionPolicies in admissionregistration.k8s.io/v1: run Kubernetes 1.37 and leave the MutatingAdmissionPolicy feature and API on")
}

func (c checker) draUsable(ctx context.Context) Result {
	const name = "DRA enabled"
	list, err := c.client.ResourceV1().DeviceClasses().List(ctx, metav1.ListOptions{})
	if err != nil {
		return Result{Name: name, Status: Fail, Detail: fmt.Sprintf("listing DeviceClasses: %v", err),
			Fix: "enable Dynamic Resource Allocation on kube-apiserver, kube-scheduler, kube-controller-manager and the kubelets (on by default since Kubernetes 1.34; check --feature-gates and --runtime-config)"}
	}
	return Result{Name: name, Status: OK, Detail: fmt.Sprintf("DeviceClasses can be listed (%d)", len(list.Items))}
}

func (c checker) rotaCRDs() Result {
	return c.served("Rota CRDs", rotav1.SchemeGroupVersion.String(), []string{"deployschedules", "gpureservations", "gpuquotas"}, installFix)
}

func (c checker) deviceClasses(ctx context.Context) Result {
	const name = "Rota DeviceClasses"
	var missing []string
	want := []string{gpuv1.DeviceClassName, "timesliced." + gpuv1.DriverName}
	for _, n := range want {
		_, err := c.client.ResourceV1().DeviceClasses().Get(ctx, n, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			missing = append(missing, n)
		case err != nil:
			return Result{Name: name, Status: Fail, Detail: fmt.Sprintf("reading DeviceClass %s: %v", n, err), Fix: "check that your user may read DeviceClasses"}
		}
	}
	if len(missing) > 0 {
		return Result{Name: name, Status: Fail, Detail: "missing " + strings.Join(missing, ", "), Fix: installFix}
	}
	return Result{Name: name, Status: OK, Detail: strings.Join(want, ", ")}
}

func (c checker) components(ctx context.Context) Result {
	const name = "Rota controllers"
	var bad, good []string
	for _, d := range []string{schedulerDeployment, controllerDeployment} {
		dep, err := c.client.AppsV1().Deployments(c.o.Namespace).Get(ctx, d, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			bad = append(bad, fmt.Sprintf("Deployment %s/%s not found", c.o.Namespace, d))
		case err != nil:
			bad = append(bad, fmt.Sprintf("Deployment %s/%s: %v", c.o.Namespace, d, err))
		case dep.Status.AvailableReplicas < 1:
			bad = append(bad, fmt.Sprintf("Deployment %s/%s has no available replica (%d of %d ready)", c.o.Namespace, d, dep.Status.ReadyReplicas, dep.Status.Replicas))
		default:
			good = append(good, fmt.Sprintf("%s %d/%d available", d, dep.Status.AvailableReplicas, dep.Status.Replicas))
		}
	}
	if len(bad) > 0 {
		return Result{Name: name, Status: Fail, Detail: strings.Join(bad, "; "),
			Fix: fmt.Sprintf("%s; if installed, look at kubectl -n %s describe deployment and the pods' logs", installFix, c.o.Namespace)}
	}
	return Result{Name: name, Status: OK, Detail: strings.Join(good, ", ")}
}

func (c checker) driverDaemonSet(ctx context.Context) Result {
	const name = "Driver DaemonSet"
	ds, err := c.client.AppsV1().DaemonSets(c.o.Namespace).Get(ctx, driverDaemonSet, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return Result{Name: name, Status: Fail, Detail: fmt.Sprintf("DaemonSet %s/%s not found", c.o.Namespace, driverDaemonSet), Fix: installFix}
	case err != nil:
		return Result{Name: name, Status: Fail, Detail: fmt.Sprintf("DaemonSet %s/%s: %v", c.o.Namespace, driverDaemonSet, err), Fix: "check that your user may read DaemonSets in " + c.o.Namespace}
	}
	s := ds.Status
	detail := fmt.Sprintf("%d of %d pods ready, %d updated", s.NumberReady, s.DesiredNumberScheduled, s.UpdatedNumberScheduled)
	switch {
	case s.DesiredNumberScheduled == 0:
		return Result{Name: name, Status: Fail, Detail: "runs on no node",
			Fix: fmt.Sprintf("label the GPU nodes %s (the DaemonSet's nodeSelector), or change the selector", c.o.GPUNodeSelector)}
	case s.NumberReady < s.DesiredNumberScheduled:
		return Result{Name: name, Status: Fail, Detail: detail,
			Fix: fmt.Sprintf("kubectl -n %s get pods -l app.kubernetes.io/name=%s -o wide, then describe and read the logs of the pods not ready", c.o.Namespace, driverDaemonSet)}
	}
	return Result{Name: name, Status: OK, Detail: detail}
}

func (c checker) driverSlices(ctx context.Context) Result {
	const name = "Driver registered"
	nodes, err := c.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: c.o.GPUNodeSelector})
	if err != nil {
		return Result{Name: name, Status: Fail, Detail: fmt.Sprintf("listing nodes %s: %v", c.o.GPUNodeSelector, err), Fix: "check that your user may list nodes"}
	}
	if len(nodes.Items) == 0 {
		return Result{Name: name, Status: Fail, Detail: fmt.Sprintf("no node is labelled %s", c.o.GPUNodeSelector),
			Fix: fmt.Sprintf("label each GPU node: kubectl label node NODE %s (NVIDIA's GPU feature discovery sets it too)", c.o.GPUNodeSelector)}
	}
	slices, err := c.client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector(resourceapi.ResourceSliceSelectorDriver, gpuv1.DriverName).String()})
	if err != nil {
		return Result{Name: name, Status: Fail, Detail: fmt.Sprintf("listing ResourceSlices: %v", err), Fix: "check that your user may list ResourceSlices"}
	}
	devices := map[string]int{}
	for _, s := range slices.Items {
		if s.Spec.NodeName != nil {
			devices[*s.Spec.NodeName] += len(s.Spec.Devices)
		}
	}
	var missing []string
	total := 0
	for _, n := range nodes.Items {
		if devices[n.Name] == 0 {
			missing = append(missing, n.Name)
		}
		total += devices[n.Name]
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		return Result{Name: name, Status: Fail,
			Detail: fmt.Sprintf("%d of %d GPU nodes publish no %s ResourceSlice with devices: %s", len(missing), len(nodes.Items), gpuv1.DriverName, strings.Join(missing, ", ")),
			Fix: fmt.Sprintf("on those nodes, read the logs of the %s pod (kubectl -n %s logs -l app.kubernetes.io/name=%s): it says when NVML or the kubelet registration fails",
				driverDaemonSet, c.o.Namespace, driverDaemonSet)}
	}
	return Result{Name: name, Status: OK, Detail: fmt.Sprintf("%d GPU nodes publish %d GPUs through %s", len(nodes.Items), total, gpuv1.DriverName)}
}

// cdi looks for evidence that the container runtime applies CDI devices:
// the API server does not show the runtime's configuration, only what
// happened to a pod whose claim the driver prepared.
func (c checker) cdi(ctx context.Context) Result {
	const name = "CDI in the container runtime"
	fix := "the API server cannot show the runtime's configuration: CRI-O and containerd 2.x enable CDI by default; on containerd 1.7 set enable_cdi = true and cdi_spec_dirs = [\"/etc/cdi\", \"/var/run/cdi\"] in the CRI plugin's config and restart it. Then run a pod with a " + gpuv1.DeviceClassName + " claim (docs/user-guide.md) and run this check again"
	claims, err := c.client.ResourceV1().ResourceClaims(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return Result{Name: name, Status: Unknown, Detail: fmt.Sprintf("listing ResourceClaims: %v", err), Fix: fix}
	}
	for _, claim := range claims.Items {
		if !allocatedByDriver(&claim) {
			continue
		}
		for _, ref := range claim.Status.ReservedFor {
			if ref.Resource != "pods" {
				continue
			}
			pod, err := c.client.CoreV1().Pods(claim.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
			if err != nil || pod.UID != ref.UID {
				continue
			}
			if msg := cdiFailure(pod); msg != "" {
				return Result{Name: name, Status: Fail,
					Detail: fmt.Sprintf("pod %s/%s on node %s could not start: %s", pod.Namespace, pod.Name, pod.Spec.NodeName, msg),
					Fix:    "enable CDI in that node's container runtime: " + fix}
			}
			if started(pod) {
				return Result{Name: name, Status: OK,
					Detail: fmt.Sprintf("pod %s/%s runs on node %s with claim %s prepared by %s: the runtime applied its CDI devices", pod.Namespace, pod.Name, pod.Spec.NodeName, claim.Name, gpuv1.DriverName)}
			}
		}
	}
	return Result{Name: name, Status: Unknown, Detail: "no pod with a " + gpuv1.DriverName + " claim has started yet", Fix: fix}
}

func allocatedByDriver(claim *resourceapi.ResourceClaim) bool {
	if claim.Status.Allocation == nil {
		return false
	}
	for _, r := range claim.Status.Allocation.Devices.Results {
		if r.Driver == gpuv1.DriverName {
			return true
		}
	}
	return false
}

func started(pod *corev1.Pod) bool {
	for _, s := range pod.Status.ContainerStatuses {
		if s.State.Running != nil || (s.State.Terminated != nil && s.State.Terminated.ExitCode == 0) {
			return true
		}
	}
	return false
}

// cdiFailure returns the message of a container the runtime could not
// create because of CDI, or "".
func cdiFailure(pod *corev1.Pod) string {
	for _, s := range pod.Status.ContainerStatuses {
		if w := s.State.Waiting; w != nil && strings.Contains(w.Message, "CDI") {
			return w.Reason + ": " + w.Message
		}
	}
	return ""
}
