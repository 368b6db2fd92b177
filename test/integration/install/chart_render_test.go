package install

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/chart/common"
	chartutil "helm.sh/helm/v4/pkg/chart/common/util"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/engine"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/rota-dev/rota/pkg/sandbox/apply"
	"github.com/rota-dev/rota/test/integration/framework"
)

// releaseNamespace is where the chart is installed in these tests, the
// namespace the kustomize install uses (helm install -n rota-system).
const releaseNamespace = "rota-system"

// chartDir is charts/rota in this checkout.
func chartDir(t *testing.T) string {
	t.Helper()
	return filepath.Join(framework.RepoRoot(t), "charts", "rota")
}

// loadChart loads charts/rota as `helm install` does (.helmignore applied).
func loadChart(t *testing.T) *chart.Chart {
	t.Helper()
	ch, err := loader.Load(chartDir(t))
	if err != nil {
		t.Fatalf("load charts/rota: %v", err)
	}
	return ch
}

// allValues reads charts/rota/ci/all-values.yaml, the values file that sets
// every value of the chart.
func allValues(t *testing.T) map[string]any {
	t.Helper()
	vals, err := common.ReadValuesFile(filepath.Join(chartDir(t), "ci", "all-values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return vals
}

// renderChart renders the chart as `helm install rota charts/rota -n
// rota-system` would with the given values (on top of values.yaml): the
// values checked against values.schema.json, the templates rendered in
// strict mode (a missing value is an error), and the CRDs of crds/, which
// Helm applies before the templates. NOTES.txt is left out.
func renderChart(ch *chart.Chart, values map[string]any) ([]*unstructured.Unstructured, error) {
	caps := *common.DefaultCapabilities
	caps.KubeVersion = common.KubeVersion{Version: "v1.37.0", Major: "1", Minor: "37"}
	vals, err := chartutil.ToRenderValues(ch, values, common.ReleaseOptions{
		Name: "rota", Namespace: releaseNamespace, Revision: 1, IsInstall: true,
	}, &caps)
	if err != nil {
		return nil, err
	}
	files, err := engine.Engine{Strict: true}.RenderWithContext(context.Background(), ch, vals)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(files))
	for name := range files {
		if strings.HasSuffix(name, ".yaml") {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	var objs []*unstructured.Unstructured
	for _, crd := range ch.CRDObjects() {
		o, err := apply.DecodeObjects(crd.File.Data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", crd.Filename, err)
		}
		objs = append(objs, o...)
	}
	for _, name := range names {
		o, err := apply.DecodeObjects([]byte(files[name]))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		objs = append(objs, o...)
	}
	return objs, nil
}

// mustRenderChart is renderChart that fails the test on an error.
func mustRenderChart(t *testing.T, ch *chart.Chart, values map[string]any) []*unstructured.Unstructured {
	t.Helper()
	objs, err := renderChart(ch, values)
	if err != nil {
		t.Fatalf("render charts/rota: %v", err)
	}
	return objs
}

// helmLabels are the labels the chart adds to every object and the
// kustomize install does not have.
var helmLabels = []string{
	"helm.sh/chart",
	"app.kubernetes.io/managed-by",
	"app.kubernetes.io/instance",
	"app.kubernetes.io/part-of",
	"app.kubernetes.io/version",
}

const schedulerConfigPrefix = "rota-scheduler-config-"

// normalize returns a copy of o in which what legitimately differs between
// the chart and the kustomize install is made equal: Helm's labels are
// removed, the hash in the scheduler ConfigMap's name becomes <hash> (each
// tool hashes the content its own way), the scheduler config is compared
// as YAML data rather than text (comments differ), and every image loses its
// tag or digest (the release sets those: the chart from its appVersion,
// kustomize from its images: list). In strings of more than one line (the
// admission policies' CEL) every run of white space counts as one space:
// kustomize re-folds YAML's folded scalars and adds a blank line before
// each more-indented line, which the CEL compiler ignores. The images' tags
// are returned by container name for a separate check.
func normalize(t *testing.T, o *unstructured.Unstructured) (*unstructured.Unstructured, map[string]string) {
	t.Helper()
	n, tags := normalizeFields(t, o.DeepCopy())
	n.Object = collapseSpace(n.Object).(map[string]any)
	return n, tags
}

// normalizeFields is normalize but for the white space, on a copy.
func normalizeFields(t *testing.T, o *unstructured.Unstructured) (*unstructured.Unstructured, map[string]string) {
	t.Helper()
	if labels := o.GetLabels(); labels != nil {
		for _, k := range helmLabels {
			delete(labels, k)
		}
		if len(labels) == 0 {
			unstructured.RemoveNestedField(o.Object, "metadata", "labels")
		} else {
			o.SetLabels(labels)
		}
	}
	if o.GetKind() == "ConfigMap" && strings.HasPrefix(o.GetName(), schedulerConfigPrefix) {
		o.SetName(schedulerConfigPrefix + "<hash>")
		text, _, _ := unstructured.NestedString(o.Object, "data", "config.yaml")
		var cfg any
		if err := yaml.Unmarshal([]byte(text), &cfg); err != nil {
			t.Fatalf("ConfigMap %s: config.yaml: %v", o.GetName(), err)
		}
		o.Object["data"] = map[string]any{"config.yaml": cfg}
	}
	tags := map[string]string{}
	spec, found, _ := unstructured.NestedMap(o.Object, "spec", "template", "spec")
	if !found {
		return o, tags
	}
	for _, field := range []string{"containers", "initContainers"} {
		containers, _, _ := unstructured.NestedSlice(spec, field)
		for _, c := range containers {
			c := c.(map[string]any)
			repo, tag := splitImage(c["image"].(string))
			c["image"] = repo
			tags[c["name"].(string)] = tag
		}
		if containers != nil {
			spec[field] = containers
		}
	}
	volumes, _, _ := unstructured.NestedSlice(spec, "volumes")
	for _, v := range volumes {
		v := v.(map[string]any)
		if name, _, _ := unstructured.NestedString(v, "configMap", "name"); strings.HasPrefix(name, schedulerConfigPrefix) {
			_ = unstructured.SetNestedField(v, schedulerConfigPrefix+"<hash>", "configMap", "name")
		}
	}
	if volumes != nil {
		spec["volumes"] = volumes
	}
	_ = unstructured.SetNestedMap(o.Object, spec, "spec", "template", "spec")
	return o, tags
}

// collapseSpace returns v with every run of white space in its multi-line
// strings replaced by one space.
func collapseSpace(v any) any {
	switch v := v.(type) {
	case string:
		if strings.Contains(v, "\n") {
			return strings.Join(strings.Fields(v), " ")
		}
		return v
	case map[string]any:
		for k, e := range v {
			v[k] = collapseSpace(e)
		}
		return v
	case []any:
		for i, e := range v {
			v[i] = collapseSpace(e)
		}
		return v
	default:
		return v
	}
}

// splitImage splits an image reference into its repository and its tag or
// digest.
func splitImage(ref string) (repo, tag string) {
	if i := strings.Index(ref, "@"); i >= 0 {
		return ref[:i], ref[i+1:]
	}
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		return ref[:i], ref[i+1:]
	}
	return ref, ""
}

func objectKey(o *unstructured.Unstructured) string {
	return fmt.Sprintf("%s %s/%s", o.GetKind(), o.GetNamespace(), o.GetName())
}

// toYAML prints an object for a failure message.
func toYAML(o *unstructured.Unstructured) string {
	out, err := yaml.Marshal(o.Object)
	if err != nil {
		return err.Error()
	}
	return string(out)
}

// writeTemp writes data to a file in the test's temporary directory.
func writeTemp(t *testing.T, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
