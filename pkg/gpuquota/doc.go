// Package gpuquota holds the rules of GPUQuota, the tenants' guarantees and
// limits per GPU model (docs/admission.md, "Guarantees, borrowing and
// reclaim"): decoding and validating the objects, the table the scheduler
// reads (what a tenant may hold, how much of a pod would be borrowed, how
// much a reclaim may take from a tenant), and the accounting the controller
// publishes (used, borrowed and lent per tenant; whether the guarantees fit
// the pool). It reads no API server: callers hand it objects and counts.
package gpuquota
