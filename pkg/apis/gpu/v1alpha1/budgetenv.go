package v1alpha1

import "fmt"

// Environment variables the driver puts in the CDI spec of a claim whose
// GpuConfig grants memoryMiB, so that the workload can keep within its
// share of a time-sliced GPU, which has no hardware memory cap
// (docs/driver.md, "The granted budget in the container").
const (
	// EnvMemoryBudgetMiB is the VRAM in MiB the claim may use on each of
	// its GPUs: memoryMiB (summed over the claim's requests that share a
	// GPU), the smallest over its GPUs.
	EnvMemoryBudgetMiB = "ROTA_GPU_MEMORY_BUDGET_MIB"
	// EnvMemoryFraction is that budget as a fraction of the GPU's memory,
	// floored to four places (MemoryFraction), the smallest over its GPUs:
	// the value for vLLM's --gpu-memory-utilization.
	EnvMemoryFraction = "ROTA_GPU_MEMORY_FRACTION"
)

// fractionScale is the fixed-point scale of MemoryFraction: four places.
const fractionScale = 10000

// MemoryFractionTenThousandths is floor(memoryMiB / totalMiB × 10000),
// computed in integers; 0 when totalMiB is not positive.
func MemoryFractionTenThousandths(memoryMiB, totalMiB int64) int64 {
	if totalMiB <= 0 || memoryMiB <= 0 {
		return 0
	}
	return min(memoryMiB*fractionScale/totalMiB, fractionScale)
}

// MemoryFraction formats MemoryFractionTenThousandths as a decimal:
// 40960 MiB of an H200's 143771 MiB is "0.2848". Flooring keeps a process
// that uses exactly this fraction within its budget.
func MemoryFraction(memoryMiB, totalMiB int64) string {
	v := MemoryFractionTenThousandths(memoryMiB, totalMiB)
	return fmt.Sprintf("%d.%04d", v/fractionScale, v%fractionScale)
}
