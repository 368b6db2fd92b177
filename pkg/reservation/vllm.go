package reservation

import (
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
)

// DefaultVLLMUtilization is the share of each GPU's memory vLLM takes when
// --gpu-memory-utilization is not given.
const DefaultVLLMUtilization = "0.9"

// VLLMUse is what a container asks vLLM to take of each of its GPUs.
type VLLMUse struct {
	Container string
	// Value is the --gpu-memory-utilization given, or DefaultVLLMUtilization.
	Value string
	// Given is false when the flag is absent and vLLM's default applies.
	Given bool
	// TenThousandths is Value in fixed point (0.9 -> 9000).
	TenThousandths int64
}

// VLLMUses finds the containers of pod that run vLLM and what share of GPU
// memory they ask it for. A container runs vLLM when its image is a vLLM
// image (the name contains "vllm") or its command or arguments start vLLM
// ("vllm serve", "python -m vllm.entrypoints..."), also inside a shell
// string. The flag is read in any form vLLM accepts (--gpu-memory-utilization
// 0.5, =0.5, underscores). A value that names $ROTA_GPU_MEMORY_FRACTION (the
// driver sets it to the member's budget) or that is not a number is left to
// vLLM: neither is a conflict Rota can see.
func VLLMUses(pod *v1.Pod) []VLLMUse {
	var out []VLLMUse
	for _, c := range pod.Spec.Containers {
		var words []string
		for _, s := range append(append([]string(nil), c.Command...), c.Args...) {
			words = append(words, strings.Fields(s)...)
		}
		if !runsVLLM(c.Image, words) {
			continue
		}
		u := VLLMUse{Container: c.Name, Value: DefaultVLLMUtilization}
		for i, w := range words {
			w = strings.Trim(w, `'"`)
			name, value, hasValue := strings.Cut(w, "=")
			if strings.ReplaceAll(name, "_", "-") != "--gpu-memory-utilization" {
				continue
			}
			if !hasValue && i+1 < len(words) {
				value = strings.Trim(words[i+1], `'"`)
			}
			u.Value, u.Given = value, true
		}
		if strings.Contains(u.Value, gpuv1.EnvMemoryFraction) {
			continue
		}
		f, err := strconv.ParseFloat(u.Value, 64)
		if err != nil || f <= 0 {
			continue
		}
		u.TenThousandths = int64(f*10000 + 0.5)
		out = append(out, u)
	}
	return out
}

func runsVLLM(image string, words []string) bool {
	repo, _, _ := strings.Cut(image, "@")
	if i := strings.LastIndex(repo, ":"); i > strings.LastIndex(repo, "/") {
		repo = repo[:i]
	}
	if strings.Contains(strings.ToLower(repo), "vllm") {
		return true
	}
	for _, w := range words {
		w = strings.Trim(w, `'"`)
		if w == "vllm" || strings.HasSuffix(w, "/vllm") || strings.HasPrefix(w, "vllm.entrypoints") {
			return true
		}
	}
	return false
}
