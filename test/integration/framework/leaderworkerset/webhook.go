package leaderworkerset

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	lwsv1 "sigs.k8s.io/lws/api/leaderworkerset/v1"
	"sigs.k8s.io/yaml"

	rotav1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/test/integration/framework"
)

// webhookServer is controller-runtime's webhook.Server served by an
// httptest TLS server: it listens on a loopback port the kernel picks, and
// its certificate (issued for 127.0.0.1) is the CA bundle the apiserver
// gets.
type webhookServer struct {
	mux *http.ServeMux
	srv *httptest.Server

	mu    sync.Mutex
	paths map[string]bool
}

func startWebhookServer(tb testing.TB) *webhookServer {
	tb.Helper()
	s := &webhookServer{mux: http.NewServeMux(), paths: map[string]bool{}}
	s.srv = httptest.NewUnstartedServer(s.mux)
	s.srv.StartTLS()
	return s
}

func (s *webhookServer) NeedLeaderElection() bool { return false }

func (s *webhookServer) Register(path string, hook http.Handler) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.paths[path] = true
	s.mux.Handle(path, hook)
}

func (s *webhookServer) served(path string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.paths[path]
}

// Start serves until ctx ends; the listener is already open.
func (s *webhookServer) Start(ctx context.Context) error {
	<-ctx.Done()
	return nil
}

func (s *webhookServer) StartedChecker() healthz.Checker { return healthz.Ping }
func (s *webhookServer) WebhookMux() *http.ServeMux      { return s.mux }
func (s *webhookServer) close()                          { s.srv.Close() }

func (s *webhookServer) caBundle() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.srv.Certificate().Raw})
}

// Where lws keeps its webhook configuration, and the patches its
// config/webhook/kustomization.yaml applies to each kind (they limit the
// pod webhooks to pods labelled with a LeaderWorkerSet's name).
var (
	webhookManifest = filepath.Join("config", "webhook", "manifests.yaml")
	webhookPatches  = map[string]string{
		"MutatingWebhookConfiguration":   filepath.Join("config", "webhook", "mutating-patch.yaml"),
		"ValidatingWebhookConfiguration": filepath.Join("config", "webhook", "validating-patch.yaml"),
	}
)

// namePrefix is the one config/default's kustomization gives every object.
const namePrefix = "lws-"

// registerWebhooks creates lws's webhook configurations, patched as its
// kustomization patches them, with each webhook served by hooks instead of
// its in-cluster Service (webhooks whose path hooks does not serve, those
// of DisaggregatedSets, are left out), and waits until the apiserver calls
// them. They are deleted when the test ends, before hooks stops serving.
func registerWebhooks(tb testing.TB, cp *framework.ControlPlane, dir string, hooks *webhookServer) {
	tb.Helper()
	ctx := context.Background()
	data, err := os.ReadFile(filepath.Join(dir, webhookManifest))
	if err != nil {
		tb.Fatal(err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var created []func()
	for {
		var doc map[string]any
		if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			tb.Fatalf("%s: %v", webhookManifest, err)
		}
		if len(doc) == 0 {
			continue
		}
		raw, err := json.Marshal(doc)
		if err != nil {
			tb.Fatal(err)
		}
		kind := (&unstructured.Unstructured{Object: doc}).GetKind()
		if patch, ok := webhookPatches[kind]; ok {
			raw = applyPatch(tb, raw, filepath.Join(dir, patch))
		}
		switch kind {
		case "MutatingWebhookConfiguration":
			var c admissionv1.MutatingWebhookConfiguration
			decodeStrict(tb, raw, &c)
			c.Name = namePrefix + c.Name
			c.Webhooks = keepServed(hooks, c.Webhooks, func(w *admissionv1.MutatingWebhook) *admissionv1.WebhookClientConfig { return &w.ClientConfig })
			api := cp.Client.AdmissionregistrationV1().MutatingWebhookConfigurations()
			if _, err := api.Create(ctx, &c, metav1.CreateOptions{}); err != nil {
				tb.Fatalf("create %s: %v", c.Name, err)
			}
			created = append(created, func() { _ = api.Delete(ctx, c.Name, metav1.DeleteOptions{}) })
		case "ValidatingWebhookConfiguration":
			var c admissionv1.ValidatingWebhookConfiguration
			decodeStrict(tb, raw, &c)
			c.Name = namePrefix + c.Name
			c.Webhooks = keepServed(hooks, c.Webhooks, func(w *admissionv1.ValidatingWebhook) *admissionv1.WebhookClientConfig { return &w.ClientConfig })
			api := cp.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations()
			if _, err := api.Create(ctx, &c, metav1.CreateOptions{}); err != nil {
				tb.Fatalf("create %s: %v", c.Name, err)
			}
			created = append(created, func() { _ = api.Delete(ctx, c.Name, metav1.DeleteOptions{}) })
		default:
			tb.Fatalf("%s: unexpected %s", webhookManifest, kind)
		}
	}
	tb.Cleanup(func() {
		for _, del := range created {
			del()
		}
	})
	waitForWebhooks(tb, cp)
}

// keepServed keeps the webhooks that hooks serves, each pointed at hooks.
func keepServed[W any](hooks *webhookServer, webhooks []W, config func(*W) *admissionv1.WebhookClientConfig) []W {
	var kept []W
	for _, w := range webhooks {
		if cc, ok := hooks.clientConfig(*config(&w)); ok {
			*config(&w) = cc
			kept = append(kept, w)
		}
	}
	return kept
}

// clientConfig points a webhook at hooks, false when hooks does not serve
// its path.
func (s *webhookServer) clientConfig(cc admissionv1.WebhookClientConfig) (admissionv1.WebhookClientConfig, bool) {
	if cc.Service == nil || cc.Service.Path == nil || !s.served(*cc.Service.Path) {
		return cc, false
	}
	url := s.srv.URL + *cc.Service.Path
	return admissionv1.WebhookClientConfig{URL: &url, CABundle: s.caBundle()}, true
}

func applyPatch(tb testing.TB, doc []byte, file string) []byte {
	tb.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		tb.Fatal(err)
	}
	ops, err := yaml.YAMLToJSON(data)
	if err != nil {
		tb.Fatalf("%s: %v", file, err)
	}
	patch, err := jsonpatch.DecodePatch(ops)
	if err != nil {
		tb.Fatalf("%s: %v", file, err)
	}
	out, err := patch.Apply(doc)
	if err != nil {
		tb.Fatalf("apply %s: %v", file, err)
	}
	return out
}

func decodeStrict(tb testing.TB, raw []byte, into any) {
	tb.Helper()
	if err := yaml.UnmarshalStrict(raw, into); err != nil {
		tb.Fatalf("%s: %v", webhookManifest, err)
	}
}

// waitForWebhooks waits until the apiserver calls the webhooks: a dry-run
// LeaderWorkerSet comes back with the subdomain policy only the defaulting
// webhook sets, and a dry-run pod labelled as a LeaderWorkerSet's but
// without its size annotation is refused by the pod webhook.
func waitForWebhooks(tb testing.TB, cp *framework.ControlPlane) {
	tb.Helper()
	const probeNS = "default"
	lws := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": rotav1.LeaderWorkerSetGroupVersion, "kind": rotav1.LeaderWorkerSetKind,
		"metadata": map[string]any{"namespace": probeNS, "name": "webhook-probe"},
		"spec": map[string]any{"leaderWorkerTemplate": map[string]any{"workerTemplate": map[string]any{
			"spec": map[string]any{"containers": []any{map[string]any{"name": "main", "image": "registry.k8s.io/pause:3.10"}}},
		}}},
	}}
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: probeNS, Name: "webhook-probe", Labels: map[string]string{lwsv1.SetNameLabelKey: "webhook-probe"}},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10"}}},
	}
	dryRun := []string{metav1.DryRunAll}
	framework.WaitFor(tb, "the LeaderWorkerSet webhooks called by the apiserver", func(ctx context.Context) (bool, string, error) {
		got, err := cp.Dynamic.Resource(rotav1.LeaderWorkerSetsResource).Namespace(probeNS).Create(ctx, lws, metav1.CreateOptions{DryRun: dryRun})
		if err != nil {
			return false, fmt.Sprintf("dry-run LeaderWorkerSet: %v", err), nil
		}
		if policy, _, _ := unstructured.NestedString(got.Object, "spec", "networkConfig", "subdomainPolicy"); policy != string(lwsv1.SubdomainShared) {
			return false, "dry-run LeaderWorkerSet not defaulted by the webhook yet", nil
		}
		_, err = cp.Client.CoreV1().Pods(probeNS).Create(ctx, pod, metav1.CreateOptions{DryRun: dryRun})
		if err == nil || !strings.Contains(err.Error(), "size annotation") {
			return false, fmt.Sprintf("dry-run pod without size annotation: not refused by the pod webhook yet (%v)", err), nil
		}
		return true, "", nil
	})
}
