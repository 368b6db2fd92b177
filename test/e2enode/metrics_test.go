package e2enode

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// driverMetricsPort is where the e2e install has the driver serve
// /metrics: on the pod's address instead of its loopback, so that this
// host reaches it over the pods' bridge.
const driverMetricsPort = 8081

// driverPod returns the running driver pod of the node.
func driverPod(ctx context.Context, t *testing.T) *corev1.Pod {
	t.Helper()
	pods, err := cluster.client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=rota-dra-kubelet-plugin"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range pods.Items {
		if p := &pods.Items[i]; p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" && p.DeletionTimestamp == nil {
			return p
		}
	}
	t.Fatalf("no running driver pod:\n%s", cluster.podSummary(ctx, namespace))
	return nil
}

// scrape returns a /metrics text.
func scrape(ctx context.Context, url string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", fmt.Errorf("GET %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return string(data), nil
}

// driverPrepares is how many claims the running driver has prepared
// (rota_driver_prepare_duration_seconds_count, every result).
func driverPrepares(ctx context.Context, t *testing.T) int {
	t.Helper()
	pod := driverPod(ctx, t)
	text, err := scrape(ctx, fmt.Sprintf("http://%s:%d/metrics", pod.Status.PodIP, driverMetricsPort))
	if err != nil {
		t.Fatalf("driver metrics: %v", err)
	}
	return int(sumSamples(text, "rota_driver_prepare_duration_seconds_count"))
}

// sumSamples adds up every sample of a metric in a /metrics text.
func sumSamples(text, metric string) float64 {
	var sum float64
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, metric+"{") && !strings.HasPrefix(line, metric+" ") {
			continue
		}
		f := strings.Fields(line)
		if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil {
			sum += v
		}
	}
	return sum
}
