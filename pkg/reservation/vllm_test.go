package reservation

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
)

func TestVLLMUses(t *testing.T) {
	pod := func(cs ...v1.Container) *v1.Pod { return &v1.Pod{Spec: v1.PodSpec{Containers: cs}} }
	tests := map[string]struct {
		pod  *v1.Pod
		want []VLLMUse
	}{
		"vllm serve with =": {
			pod:  pod(v1.Container{Name: "m", Image: "python:3.12", Command: []string{"vllm", "serve", "m", "--gpu-memory-utilization=0.5"}}),
			want: []VLLMUse{{Container: "m", Value: "0.5", Given: true, TenThousandths: 5000}},
		},
		"separate value, underscores": {
			pod:  pod(v1.Container{Name: "m", Image: "python:3.12", Command: []string{"python", "-m", "vllm.entrypoints.openai.api_server"}, Args: []string{"--gpu_memory_utilization", "0.28"}}),
			want: []VLLMUse{{Container: "m", Value: "0.28", Given: true, TenThousandths: 2800}},
		},
		"inside a shell string": {
			pod:  pod(v1.Container{Name: "m", Image: "busybox", Command: []string{"sh", "-c", "exec vllm serve m --gpu-memory-utilization 0.95"}}),
			want: []VLLMUse{{Container: "m", Value: "0.95", Given: true, TenThousandths: 9500}},
		},
		"vLLM image without the flag: the default": {
			pod:  pod(v1.Container{Name: "m", Image: "docker.io/vllm/vllm-openai:v0.11.0", Args: []string{"--model", "m"}}),
			want: []VLLMUse{{Container: "m", Value: "0.9", TenThousandths: 9000}},
		},
		"the driver's fraction is trusted": {
			pod: pod(v1.Container{Name: "m", Image: "busybox", Command: []string{"sh", "-c", `vllm serve m --gpu-memory-utilization "$ROTA_GPU_MEMORY_FRACTION"`}}),
		},
		"not vLLM": {
			pod: pod(v1.Container{Name: "m", Image: "pytorch/pytorch", Args: []string{"--gpu-memory-utilization", "0.9"}}),
		},
		"a registry port is not a tag": {
			pod:  pod(v1.Container{Name: "m", Image: "registry:5000/vllm-openai", Args: []string{"--gpu-memory-utilization=0.3"}}),
			want: []VLLMUse{{Container: "m", Value: "0.3", Given: true, TenThousandths: 3000}},
		},
		"not a number is vLLM's to refuse": {
			pod: pod(v1.Container{Name: "m", Image: "vllm/vllm-openai", Args: []string{"--gpu-memory-utilization", "lots"}}),
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, VLLMUses(tc.pod)); diff != "" {
				t.Errorf("VLLMUses (-want +got):\n%s", diff)
			}
		})
	}
}
