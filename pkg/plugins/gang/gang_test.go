package gang

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
)

func TestGangOf(t *testing.T) {
	pod := func(labels, ann map[string]string) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-g", Name: "p", Labels: labels, Annotations: ann}}
	}
	cases := map[string]struct {
		pod      *v1.Pod
		wantKey  types.NamespacedName
		wantSize int
		wantOK   bool
		wantErr  string
	}{
		"not in a gang": {pod: pod(nil, nil)},
		"member": {
			pod:     pod(map[string]string{gpuv1.GangLabel: "train"}, map[string]string{gpuv1.GangSizeAnnotation: "2"}),
			wantKey: types.NamespacedName{Namespace: "team-g", Name: "train"}, wantSize: 2, wantOK: true,
		},
		"size missing": {
			pod:     pod(map[string]string{gpuv1.GangLabel: "train"}, nil),
			wantKey: types.NamespacedName{Namespace: "team-g", Name: "train"}, wantOK: true,
			wantErr: `annotation rota.dev/gang-size="" is not a positive integer`,
		},
		"size zero": {
			pod:     pod(map[string]string{gpuv1.GangLabel: "train"}, map[string]string{gpuv1.GangSizeAnnotation: "0"}),
			wantKey: types.NamespacedName{Namespace: "team-g", Name: "train"}, wantOK: true,
			wantErr: `annotation rota.dev/gang-size="0" is not a positive integer`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			key, size, ok, err := gangOf(tc.pod)
			if diff := cmp.Diff([]any{tc.wantKey, tc.wantSize, tc.wantOK}, []any{key, size, ok}); diff != "" {
				t.Errorf("gangOf (-want +got):\n%s", diff)
			}
			if (err != nil) != (tc.wantErr != "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("gangOf error %v, want %q", err, tc.wantErr)
			}
		})
	}
}

func TestDecodeArgs(t *testing.T) {
	args, err := decodeArgs(nil)
	if err != nil || args.WaitLimit.Duration != DefaultWaitLimit {
		t.Fatalf("defaults: %+v, %v", args, err)
	}
	bad := &GangArgs{WaitLimit: &metav1.Duration{Duration: -1}}
	if _, err := decodeArgs(bad); err == nil || !strings.Contains(err.Error(), "args.waitLimit") {
		t.Fatalf("negative wait limit: %v, want an error naming args.waitLimit", err)
	}
}
