package e2enode

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
)

// startLatencyRounds is how many pods of each kind TestPodStartLatency
// starts, alternating.
const startLatencyRounds = 5

// Pod start latency on the real node, measured (not asserted): create →
// container running for a pod with an H100-else-A100 claim placed by
// rota-scheduler, against the same pod without a claim, one after the
// other in turn; and the kubelet's own figures for preparing claims. The
// figures are logged for docs/benchmarks.md.
func TestPodStartLatency(t *testing.T) {
	ctx := context.Background()
	ns := createNamespace(ctx, t, "latency")
	tmpl := h100ElseA100(t, ns, 10240)
	if _, err := cluster.client.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, tmpl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	before, err := cluster.node.KubeletMetrics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var withClaim, without []time.Duration
	for i := range startLatencyRounds {
		gpu := gpuPod(ns, "gpu-"+string(rune('a'+i)), tmpl.Name)
		withClaim = append(withClaim, startAndStop(ctx, t, gpu))
		plain := gpuPod(ns, "plain-"+string(rune('a'+i)), tmpl.Name)
		plain.Spec.ResourceClaims, plain.Spec.Containers[0].Resources.Claims = nil, nil
		without = append(without, startAndStop(ctx, t, plain))
	}
	t.Logf("create → running, %d pods each: with a claim median %s (min %s, max %s); without median %s (min %s, max %s)",
		startLatencyRounds, median(withClaim), slices.Min(withClaim), slices.Max(withClaim), median(without), slices.Min(without), slices.Max(without))

	metrics, err := cluster.node.KubeletMetrics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []struct{ what, prefix string }{
		{"kubelet PrepareResources (every pod start, with or without claims)", `dra_operations_duration_seconds_%s{is_error="false",operation_name="PrepareResources"}`},
		{"kubelet → driver NodePrepareResources gRPC", `dra_grpc_operations_duration_seconds_%s{driver_name="` + gpuv1.DriverName + `",grpc_status_code="OK",method_name="/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodePrepareResources"}`},
	} {
		// This test's calls only: the kubelet has run other tests' pods.
		sum := sampleValue(metrics, strings.Replace(m.prefix, "%s", "sum", 1)) - sampleValue(before, strings.Replace(m.prefix, "%s", "sum", 1))
		count := sampleValue(metrics, strings.Replace(m.prefix, "%s", "count", 1)) - sampleValue(before, strings.Replace(m.prefix, "%s", "count", 1))
		if count == 0 {
			var dra []string
			for _, line := range strings.Split(metrics, "\n") {
				if strings.Contains(line, "dra_") && !strings.HasPrefix(line, "#") {
					dra = append(dra, line)
				}
			}
			t.Errorf("the kubelet's metrics have no %s samples (%s); its DRA samples:\n%s", m.what, m.prefix, strings.Join(dra, "\n"))
			continue
		}
		t.Logf("%s: mean %s over %.0f calls (the kubelet's metrics)", m.what, time.Duration(sum/count*float64(time.Second)).Round(100*time.Microsecond), count)
	}
}

// startAndStop creates pod, returns how long until its container ran,
// then deletes it and waits until it is gone.
func startAndStop(ctx context.Context, t *testing.T, pod *corev1.Pod) time.Duration {
	t.Helper()
	start := time.Now()
	if _, err := cluster.client.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var took time.Duration
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := cluster.client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil || len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].State.Running == nil {
			return false, nil
		}
		took = time.Since(start)
		return true, nil
	})
	if err != nil {
		t.Fatalf("pod %s did not start: %v\n%s", pod.Name, err, cluster.podSummary(ctx, pod.Namespace))
	}
	if err := cluster.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := cluster.client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		return err != nil, nil
	})
	if err != nil {
		t.Fatalf("pod %s was not removed: %v", pod.Name, err)
	}
	return took
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// sampleValue returns the value of the sample line that starts with
// series (name and labels as the kubelet prints them), 0 if none.
func sampleValue(text, series string) float64 {
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f
		}
	}
	return 0
}
