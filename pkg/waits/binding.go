package waits

// BindFailure is why a placement the scheduler chose could not be bound:
// the pod goes back to the queue and is placed again with the cluster as it
// is now. The scheduler's message (PodScheduled, FailedScheduling) starts
// with it, and Tiering counts it in rota_tiering_binding_failures_total
// (docs/tiering.md, "Binding failures").
type BindFailure string

const (
	// BindingConflict: the API server refused the Binding (HTTP 409): the
	// pod was bound meanwhile, or replaced by a pod of the same name.
	BindingConflict BindFailure = "BindingConflict"
	// StaleResourceSlice: a device the allocator granted is no longer
	// published by its node's ResourceSlices (the driver republished them).
	StaleResourceSlice BindFailure = "StaleResourceSlice"
	// NodeLost: the chosen node was removed from the cluster.
	NodeLost BindFailure = "NodeLost"
	// DeviceTainted: a granted device turned tainted (unhealthy) since it
	// was chosen.
	DeviceTainted BindFailure = "DeviceTainted"
	// BindError: any other error of the binding write.
	BindError BindFailure = "BindError"
)

// AllBindFailures lists the causes in a stable order, for metrics and docs.
var AllBindFailures = []BindFailure{BindingConflict, StaleResourceSlice, NodeLost, DeviceTainted, BindError}
