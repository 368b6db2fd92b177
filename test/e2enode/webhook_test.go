package e2enode

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// TestTargetWebhookOnTheNode: the chart's webhook-certs Job runs on the
// real node (runc, the restricted Pod Security profile of rota-system,
// the image as built) and writes the certificate Secret and the webhook's
// caBundle; the schedule controller's pod picks the Secret up through its
// volume and serves the target webhook on its pod address with a
// certificate the API server would trust for the Service's name, and
// refuses the controller's write of a workload no DeploySchedule names.
// (The API server of this node reaches no Service, so the review is sent
// from this host to the pod, as the API server would send it.)
func TestTargetWebhookOnTheNode(t *testing.T) {
	ctx := t.Context()
	var bundle []byte
	poll(ctx, t, 2*time.Minute, "the webhook-certs Job to write the caBundle", func(ctx context.Context) (bool, string) {
		if _, err := cluster.client.CoreV1().Secrets(namespace).Get(ctx, "rota-schedule-controller-webhook-tls", metav1.GetOptions{}); err != nil {
			return false, err.Error()
		}
		cfg, err := cluster.client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "rota-schedule-controller-targets", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		bundle = cfg.Webhooks[0].ClientConfig.CABundle
		return len(bundle) > 0, "no caBundle yet"
	})
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(bundle) {
		t.Fatalf("caBundle holds no certificate: %q", bundle)
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		RootCAs: roots, ServerName: "rota-schedule-controller-webhook." + namespace + ".svc", MinVersion: tls.VersionTLS12,
	}}}
	review, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID: "e2e", Operation: admissionv1.Update, Namespace: "team-a", Name: "payroll",
			Resource: metav1.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	var got admissionv1.AdmissionReview
	// The kubelet fills a Secret volume made before the Secret existed at
	// its next sync of the pod: up to about a minute.
	poll(ctx, t, 3*time.Minute, "the controller's pod to serve the webhook", func(ctx context.Context) (bool, string) {
		pod, err := runningRotaPod(ctx, "app.kubernetes.io/name=rota-schedule-controller")
		if err != nil {
			return false, err.Error()
		}
		url := fmt.Sprintf("https://%s:9443/validate-targets", pod.Status.PodIP)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(review))
		if err != nil {
			return false, err.Error()
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			return false, err.Error()
		}
		defer func() { _ = resp.Body.Close() }()
		body, _ := io.ReadAll(resp.Body)
		if err := json.Unmarshal(body, &got); err != nil || got.Response == nil {
			return false, fmt.Sprintf("%s: %s", resp.Status, body)
		}
		return true, ""
	})
	if got.Response.Allowed || got.Response.UID != "e2e" || got.Response.Result == nil {
		t.Fatalf("the webhook answered %+v, want a refusal of UID e2e", got.Response)
	}
	t.Logf("refused: %s", got.Response.Result.Message)
}

// runningRotaPod returns a running pod of namespace with the label selector.
func runningRotaPod(ctx context.Context, selector string) (*corev1.Pod, error) {
	pods, err := cluster.client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, err
	}
	for i := range pods.Items {
		if p := &pods.Items[i]; p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" && p.DeletionTimestamp == nil {
			return p, nil
		}
	}
	return nil, fmt.Errorf("no running pod with %s", selector)
}

// poll calls check until it is done or timeout passes, then fails the test
// with what check last said.
func poll(ctx context.Context, t *testing.T, timeout time.Duration, what string, check func(context.Context) (bool, string)) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		var done bool
		done, last = check(ctx)
		return done, nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v; last: %s\n%s", what, err, last, cluster.podSummary(ctx, namespace))
	}
}
