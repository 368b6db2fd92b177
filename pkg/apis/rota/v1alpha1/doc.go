// Package v1alpha1 holds Rota's API types in the rota.dev group: DeploySchedule
// (time windows that become replica changes) and GPUReservation (GPUs held for
// named members with a VRAM budget).
//
// Rules that can be checked on a single object live in the CRD schema through the
// kubebuilder markers below, so the apiserver rejects bad input with a field path.
// Rules that need code (time zones, cron parsing, overlap of equal-priority
// windows) live in pkg/schedule/validation.
//
// +kubebuilder:object:generate=true
// +groupName=rota.dev
package v1alpha1
