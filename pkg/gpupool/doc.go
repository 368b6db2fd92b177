// Package gpupool is Rota's one model of the GPU pool: the devices each
// node publishes in its ResourceSlices, with their model, taints and
// capacities; which are allocated, to which claim and pods, and how much of
// a shared device's capacity claims consume; which GPUReservation holds a
// device (its rota.dev/reserved taint); the requests and tiers of a claim;
// and whether a device matches a request's class and selectors.
//
// The scheduler plugins read it on their hot path (docs/architecture.md,
// "Package map"): the allocated state is gathered once per scheduling cycle
// for every plugin (CycleInventory, CycleSnapshot), and the plugins of one
// scheduler share one Caches: the index of the published slices, built only
// when the slice list changes (SliceCache), the compiled selectors, and the
// selector results per device (MatchCache).
// The reservation controller, kubectl-rota's pool report, the sandbox report
// and the capacity preview build the same model from listed objects.
package gpupool
