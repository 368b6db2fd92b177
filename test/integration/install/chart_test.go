package install

import (
	"bytes"
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/v2/lint"
	"helm.sh/helm/v4/pkg/chart/v2/lint/support"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"sigs.k8s.io/yaml"

	"github.com/rota-dev/rota/pkg/sandbox/apply"
	"github.com/rota-dev/rota/test/integration/framework"
)

// TestChartDefaultsMatchKustomize renders charts/rota with its defaults and
// the kustomize install (manifests/) and compares them object by object:
// the same kinds, names and namespaces, and the same content once Helm's
// own labels, the scheduler ConfigMap's hash and the image tags are set
// aside (normalize). The one object only kustomize renders is Namespace
// rota-system: with Helm it is the release namespace (--create-namespace).
func TestChartDefaultsMatchKustomize(t *testing.T) {
	ch := loadChart(t)
	chartObjs := mustRenderChart(t, ch, nil)
	kustomized := map[string]*unstructured.Unstructured{}
	for _, o := range render(t, "") {
		if o.GetKind() == "Namespace" && o.GetName() == releaseNamespace {
			continue
		}
		n, _ := normalize(t, o)
		kustomized[objectKey(n)] = n
	}
	charted := map[string]*unstructured.Unstructured{}
	for _, o := range chartObjs {
		n, tags := normalize(t, o)
		key := objectKey(n)
		if _, dup := charted[key]; dup {
			t.Errorf("the chart renders %s twice", key)
		}
		charted[key] = n
		for container, tag := range tags {
			if tag != ch.Metadata.AppVersion {
				t.Errorf("%s: container %s has image tag %q, want the chart's appVersion %q", key, container, tag, ch.Metadata.AppVersion)
			}
		}
	}
	keys := slices.AppendSeq(slices.Collect(maps.Keys(kustomized)), maps.Keys(charted))
	slices.Sort(keys)
	for _, k := range slices.Compact(keys) {
		want, got := kustomized[k], charted[k]
		switch {
		case got == nil:
			t.Errorf("%s: in the kustomize install, not in the chart's defaults:\n%s", k, toYAML(want))
		case want == nil:
			t.Errorf("%s: in the chart's defaults, not in the kustomize install:\n%s", k, toYAML(got))
		default:
			if diff := cmp.Diff(want.Object, got.Object); diff != "" {
				t.Errorf("%s: the chart's defaults differ from the kustomize install (-kustomize +chart):\n%s", k, diff)
			}
		}
	}
	if len(charted) < 30 {
		t.Errorf("the chart renders %d objects; the comparison saw too few to mean anything", len(charted))
	}
}

// TestChartCRDsAreTheGeneratedOnes: charts/rota/crds holds exactly the
// CRDs `make generate` writes to manifests/crds (make chart-crds copies
// them; verify-generate catches a forgotten copy in CI too).
func TestChartCRDsAreTheGeneratedOnes(t *testing.T) {
	root := framework.RepoRoot(t)
	generated, err := filepath.Glob(filepath.Join(root, "manifests", "crds", "rota.dev_*.yaml"))
	if err != nil || len(generated) == 0 {
		t.Fatalf("no generated CRDs in manifests/crds (%v)", err)
	}
	shipped, err := filepath.Glob(filepath.Join(root, "charts", "rota", "crds", "*"))
	if err != nil {
		t.Fatal(err)
	}
	var want, got []string
	for _, f := range generated {
		want = append(want, filepath.Base(f))
	}
	for _, f := range shipped {
		got = append(got, filepath.Base(f))
	}
	if !slices.Equal(want, got) {
		t.Fatalf("charts/rota/crds holds %v, manifests/crds %v: run make chart-crds", got, want)
	}
	for _, f := range generated {
		a, _ := os.ReadFile(f)
		b, err := os.ReadFile(filepath.Join(root, "charts", "rota", "crds", filepath.Base(f)))
		if err != nil || !bytes.Equal(a, b) {
			t.Errorf("charts/rota/crds/%s is not manifests/crds/%s (%v): run make chart-crds", filepath.Base(f), filepath.Base(f), err)
		}
	}
}

// TestChartDryRun has a real API server accept every object the chart
// renders, with its defaults and with every value set (server-side apply,
// dry run, in namespace rota-system), and starts the real scheduler, with
// Rota's plugins, from the profile the chart renders with every value set:
// kube-scheduler refuses plugin args its plugins do not accept.
func TestChartDryRun(t *testing.T) {
	cp := framework.StartControlPlane(t)
	applier, err := apply.NewApplier(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ns := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": releaseNamespace},
	}}
	if err := applier.Apply(ctx, ns, false); err != nil {
		t.Fatal(err)
	}
	ch := loadChart(t)
	for name, values := range map[string]map[string]any{"defaults": nil, "ci/all-values.yaml": allValues(t)} {
		objs := mustRenderChart(t, ch, values)
		for _, o := range objs {
			if err := applier.Apply(ctx, o, true); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}
	}

	objs := mustRenderChart(t, ch, allValues(t))
	var cm *unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == "ConfigMap" && strings.HasPrefix(o.GetName(), schedulerConfigPrefix) {
			cm = o
		}
	}
	if cm == nil {
		t.Fatal("ci/all-values.yaml: no scheduler ConfigMap")
	}
	text, _, _ := unstructured.NestedString(cm.Object, "data", "config.yaml")
	cp.StartSchedulerWithConfig(t, writeTemp(t, "config.yaml", []byte(text)))
}

// TestChartValues checks that values set in ci/all-values.yaml reach the
// objects that use them: the plugin args in the scheduler profile, the
// gate, the admission parameters, the flags, and the driver nodes that run
// with --consumable-memory.
func TestChartValues(t *testing.T) {
	objs := mustRenderChart(t, loadChart(t), allValues(t))
	get := func(kind, name string) *unstructured.Unstructured {
		t.Helper()
		o := find(objs, kind, name)
		if o == nil {
			t.Fatalf("ci/all-values.yaml renders no %s %s", kind, name)
		}
		return o
	}

	var cfg struct {
		ClientConnection struct{ QPS, Burst float64 }
		Profiles         []struct {
			PluginConfig []struct {
				Name string
				Args map[string]any
			}
		}
	}
	for _, o := range objs {
		if o.GetKind() == "ConfigMap" && strings.HasPrefix(o.GetName(), schedulerConfigPrefix) {
			text, _, _ := unstructured.NestedString(o.Object, "data", "config.yaml")
			if err := yaml.Unmarshal([]byte(text), &cfg); err != nil {
				t.Fatal(err)
			}
		}
	}
	if cfg.ClientConnection.QPS != 300 || cfg.ClientConnection.Burst != 600 {
		t.Errorf("scheduler clientConnection %+v, want qps 300, burst 600", cfg.ClientConnection)
	}
	args := map[string]map[string]any{}
	for _, p := range cfg.Profiles[0].PluginConfig {
		args[p.Name] = p.Args
	}
	wantArgs := map[string]map[string]any{
		"Tiering": {"policyVersion": "tiering-v2", "disablePruning": true},
		"Quota": {"modelAttribute": "gpu.rota.dev/model", "tenants": []any{
			map[string]any{"namespace": "team-a", "limits": map[string]any{"H100": float64(8), "A100": float64(16)}},
			map[string]any{"namespace": "team-b", "limits": map[string]any{"H100": float64(2)}, "overLimit": "Refuse"},
		}},
		"Fairness": {"defaultWeight": float64(2), "ageing": "10m", "tenants": []any{
			map[string]any{"namespace": "team-a", "weight": float64(3)},
		}},
		"Gang": {"waitLimit": "2m"},
	}
	if diff := cmp.Diff(wantArgs, args); diff != "" {
		t.Errorf("scheduler plugin args (-want +got):\n%s", diff)
	}

	if mode, _, _ := unstructured.NestedString(get("ConfigMap", "rota-schedule-gate").Object, "data", "mode"); mode != "observe" {
		t.Errorf("gate mode %q, want observe", mode)
	}
	params, _, _ := unstructured.NestedStringMap(get("ConfigMap", "rota-admission").Object, "data")
	if diff := cmp.Diff(map[string]string{
		"schedulerName":          "rota-scheduler",
		"extendedResourceNames":  "nvidia.com/gpu",
		"exemptNamespaces":       "kube-system,gpu-operator",
		"allowedPriorityClasses": "rota-batch",
		"priorityClasses.team-a": "rota-high,rota-batch",
	}, params); diff != "" {
		t.Errorf("ConfigMap rota-admission (-want +got):\n%s", diff)
	}
	for _, binding := range []string{"rota-gpu-pods", "rota-reserved-gpu-tolerations", "rota-gpu-classes-counted", "rota-extended-resources"} {
		actions, _, _ := unstructured.NestedStringSlice(get("ValidatingAdmissionPolicyBinding", binding).Object, "spec", "validationActions")
		if !slices.Equal(actions, []string{"Warn", "Audit"}) {
			t.Errorf("ValidatingAdmissionPolicyBinding %s: validationActions %v, want [Warn Audit]", binding, actions)
		}
	}

	if img := podSpec(t, get("Deployment", "rota-scheduler")).Containers[0].Image; img !=
		"registry.example.com/rota/scheduler:v0.1.0-rc.1@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef" {
		t.Errorf("scheduler image %s, want the tag pinned to the digest of ci/all-values.yaml", img)
	}
	ctl := podSpec(t, get("Deployment", "rota-schedule-controller"))
	if c := ctl.Containers[0]; !slices.Contains(c.Args, "--leader-elect=false") || !slices.Contains(c.Args, "--kube-api-qps=20") ||
		!slices.Contains(c.Args, "--kube-api-burst=40") || !slices.Contains(c.Args, "--workers=8") ||
		c.Image != "registry.example.com/rota/schedule-controller:v0.1.0-rc.1" || c.ImagePullPolicy != corev1.PullNever {
		t.Errorf("schedule controller container: image %s (%s), args %v", c.Image, c.ImagePullPolicy, c.Args)
	}

	// The driver: nodes labelled for consumable memory run the second
	// DaemonSet, with the flag; the other driver nodes run the first,
	// without it; no node runs both.
	plain := podSpec(t, get("DaemonSet", "rota-dra-kubelet-plugin"))
	shared := podSpec(t, get("DaemonSet", "rota-dra-kubelet-plugin-consumable-memory"))
	if slices.Contains(plain.Containers[0].Args, "--consumable-memory") || !slices.Contains(shared.Containers[0].Args, "--consumable-memory") {
		t.Errorf("--consumable-memory: first DaemonSet %v, second %v; want it in the second only", plain.Containers[0].Args, shared.Containers[0].Args)
	}
	for _, a := range []string{"--kube-api-qps=10", "--kube-api-burst=20", "--health-probe-interval=10s"} {
		if !slices.Contains(plain.Containers[0].Args, a) || !slices.Contains(shared.Containers[0].Args, a) {
			t.Errorf("driver args %v, want %s in both DaemonSets", plain.Containers[0].Args, a)
		}
	}
	gpu := map[string]string{"nvidia.com/gpu.present": "true", "rota.dev/gpu-stack": "dra"}
	for _, n := range []struct {
		labels        map[string]string
		plain, shared bool
	}{
		{gpu, true, false},
		{merge(gpu, map[string]string{"rota.dev/gpu-sharing": "memory"}), false, true},
		{merge(gpu, map[string]string{"rota.dev/gpu-sharing": "other"}), true, false},
		{map[string]string{"nvidia.com/gpu.present": "true"}, false, false},
		{map[string]string{"rota.dev/gpu-sharing": "memory"}, false, false},
	} {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: n.labels}}
		if got := runsOn(t, plain, node); got != n.plain {
			t.Errorf("node labelled %v: runs the first driver DaemonSet %v, want %v", n.labels, got, n.plain)
		}
		if got := runsOn(t, shared, node); got != n.shared {
			t.Errorf("node labelled %v: runs the --consumable-memory DaemonSet %v, want %v", n.labels, got, n.shared)
		}
	}
}

// TestChartRejectsBadValues: a wrong value fails the install with a message
// that names it, from values.schema.json or from the templates' own checks.
func TestChartRejectsBadValues(t *testing.T) {
	ch := loadChart(t)
	for _, tc := range []struct {
		name, values string
		want         []string
	}{
		{"gate mode", `scheduleController: {gateMode: maybe}`, []string{"/scheduleController/gateMode", "observe"}},
		{"misspelt value", `scheduler: {replica: 3}`, []string{"/scheduler", "replica"}},
		{"qps not a number", `driver: {kubeAPIQPS: fast}`, []string{"/driver/kubeAPIQPS"}},
		{"over-limit policy", `scheduler: {plugins: {quota: {tenants: [{namespace: team-a, limits: {H100: 8}, overLimit: Sometimes}]}}}`,
			[]string{"/scheduler/plugins/quota/tenants/0/overLimit", "Refuse"}},
		{"negative limit", `scheduler: {plugins: {quota: {tenants: [{namespace: team-a, limits: {H100: -1}}]}}}`,
			[]string{"/scheduler/plugins/quota/tenants/0/limits/H100"}},
		{"duration", `scheduler: {plugins: {gang: {waitLimit: "a minute"}}}`, []string{"/scheduler/plugins/gang/waitLimit"}},
		{"Deny with Warn", `tenantIsolation: {validationActions: [Deny, Warn]}`, []string{"/tenantIsolation/validationActions"}},
		{"digest not sha256", `driver: {image: {digest: "md5:abc"}}`, []string{"/driver/image/digest"}},
		{"replicas without leader election", `scheduler: {replicas: 2, leaderElection: {enabled: false}}`,
			[]string{"scheduler.replicas is 2 but scheduler.leaderElection.enabled is false"}},
		{"consumable memory twice", `driver: {consumableMemory: {allNodes: true, nodeSelector: {a: b}}}`,
			[]string{"driver.consumableMemory: set allNodes or nodeSelector, not both"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vals, err := common.ReadValues([]byte(tc.values))
			if err != nil {
				t.Fatal(err)
			}
			_, err = renderChart(ch, vals)
			if err == nil {
				t.Fatalf("values %s: rendered without an error", tc.values)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("values %s: error does not say %q:\n%v", tc.values, w, err)
				}
			}
		})
	}
}

// TestChartLint runs Helm's linter (the library behind `helm lint`) on the
// chart with its defaults and with every value set; as with --strict, a
// warning fails.
func TestChartLint(t *testing.T) {
	kv, err := common.ParseKubeVersion("v1.37.0")
	if err != nil {
		t.Fatal(err)
	}
	for name, values := range map[string]map[string]any{"defaults": nil, "ci/all-values.yaml": allValues(t)} {
		res := lint.RunAll(chartDir(t), values, releaseNamespace, lint.WithKubeVersion(kv))
		for _, m := range res.Messages {
			if m.Severity >= support.WarningSev {
				t.Errorf("helm lint (%s): %v", name, m)
			}
		}
	}
}

func podSpec(t *testing.T, o *unstructured.Unstructured) *corev1.PodSpec {
	t.Helper()
	raw, _, _ := unstructured.NestedMap(o.Object, "spec", "template", "spec")
	var spec corev1.PodSpec
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &spec); err != nil {
		t.Fatalf("%s: %v", objectKey(o), err)
	}
	return &spec
}

// runsOn says whether a DaemonSet pod with this spec may run on node, by
// its nodeSelector and required node affinity (the rules the DaemonSet
// controller applies).
func runsOn(t *testing.T, spec *corev1.PodSpec, node *corev1.Node) bool {
	t.Helper()
	ok, err := nodeaffinity.GetRequiredNodeAffinity(&corev1.Pod{Spec: *spec}).Match(node)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

func merge(a, b map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

// TestChartSwitches: tenantIsolation.enabled false leaves out the
// tenant-isolation policies, their bindings and their ConfigMap, and keeps
// the policies that narrow Rota's own components; driver.consumableMemory
// .allNodes runs the one driver DaemonSet with --consumable-memory.
func TestChartSwitches(t *testing.T) {
	ch := loadChart(t)
	vals, err := common.ReadValues([]byte(`
tenantIsolation: {enabled: false}
driver: {consumableMemory: {allNodes: true}}
networkPolicy: {enabled: false}
`))
	if err != nil {
		t.Fatal(err)
	}
	objs := mustRenderChart(t, ch, vals)
	for _, gone := range []struct{ kind, name string }{
		{"ConfigMap", "rota-admission"},
		{"MutatingAdmissionPolicy", "rota-gpu-pods-scheduler"},
		{"MutatingAdmissionPolicyBinding", "rota-gpu-pods-scheduler"},
		{"ValidatingAdmissionPolicy", "rota-gpu-pods"},
		{"ValidatingAdmissionPolicyBinding", "rota-gpu-pods"},
		{"ValidatingAdmissionPolicy", "rota-reserved-gpu-tolerations"},
		{"ValidatingAdmissionPolicyBinding", "rota-reserved-gpu-tolerations"},
		{"ValidatingAdmissionPolicy", "rota-gpu-classes-counted"},
		{"ValidatingAdmissionPolicyBinding", "rota-gpu-classes-counted"},
		{"DaemonSet", "rota-dra-kubelet-plugin-consumable-memory"},
		{"NetworkPolicy", "rota-default-deny-ingress"},
		{"NetworkPolicy", "rota-scheduler"},
	} {
		if find(objs, gone.kind, gone.name) != nil {
			t.Errorf("%s %s rendered with tenantIsolation.enabled false, consumableMemory.allNodes and networkPolicy.enabled false", gone.kind, gone.name)
		}
	}
	for _, kept := range []string{"rota-dra-kubelet-plugin-own-node", "rota-reservation-controller-writes"} {
		if find(objs, "ValidatingAdmissionPolicyBinding", kept) == nil {
			t.Errorf("ValidatingAdmissionPolicyBinding %s left out with tenantIsolation.enabled false", kept)
		}
	}
	ds := find(objs, "DaemonSet", "rota-dra-kubelet-plugin")
	if ds == nil {
		t.Fatal("no driver DaemonSet")
	}
	spec := podSpec(t, ds)
	if !slices.Contains(spec.Containers[0].Args, "--consumable-memory") || spec.Affinity != nil {
		t.Errorf("consumableMemory.allNodes: driver args %v, affinity %v; want the flag and no affinity", spec.Containers[0].Args, spec.Affinity)
	}
}
