package framework

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// InstallAdmissionPolicies creates the ValidatingAdmissionPolicies and
// bindings shipped in manifests/admission.
func (cp *ControlPlane) InstallAdmissionPolicies(t testing.TB) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(RepoRoot(t), "manifests", "admission", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in manifests/admission: %v", err)
	}
	ctx := context.Background()
	for _, f := range files {
		if filepath.Base(f) == "kustomization.yaml" {
			continue // kustomize's, not an object
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range strings.Split(string(data), "\n---\n") {
			var meta metav1.TypeMeta
			if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			switch meta.Kind {
			case "ValidatingAdmissionPolicy":
				var p admissionv1.ValidatingAdmissionPolicy
				if err := yaml.UnmarshalStrict([]byte(doc), &p); err != nil {
					t.Fatalf("%s: %v", f, err)
				}
				if _, err := cp.Client.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, &p, metav1.CreateOptions{}); err != nil {
					t.Fatalf("create policy from %s: %v", f, err)
				}
			case "ValidatingAdmissionPolicyBinding":
				var b admissionv1.ValidatingAdmissionPolicyBinding
				if err := yaml.UnmarshalStrict([]byte(doc), &b); err != nil {
					t.Fatalf("%s: %v", f, err)
				}
				if _, err := cp.Client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, &b, metav1.CreateOptions{}); err != nil {
					t.Fatalf("create binding from %s: %v", f, err)
				}
			default:
				t.Fatalf("%s: unexpected kind %q", f, meta.Kind)
			}
		}
	}
}
