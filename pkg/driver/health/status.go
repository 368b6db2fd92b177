// Package health watches NVML for GPU faults (XID events, lost GPUs, ECC
// errors) and turns them into per-GPU health that the driver publishes as
// device taints and reports to the kubelet.
package health

// State is the health of one GPU.
type State string

const (
	// Healthy GPUs carry no taint.
	Healthy State = "Healthy"
	// Degraded GPUs saw an application XID recently; they keep scheduling
	// (taint effect None) but operators see it.
	Degraded State = "Degraded"
	// Unhealthy GPUs are tainted NoSchedule so new claims skip them.
	Unhealthy State = "Unhealthy"
)

// Status is the health of one GPU and why.
type Status struct {
	State State
	// Reason is short and label-value shaped ("xid-79", "gpu-lost", "ecc"),
	// published as the taint value.
	Reason string
	// Message is for humans: logs and the kubelet's health stream.
	Message string
}

// IsHealthy reports whether the GPU can take new claims.
func (s Status) IsHealthy() bool { return s.State != Unhealthy }
