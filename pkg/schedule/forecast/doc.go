// Package forecast sets what DeploySchedules will ask of the GPU pool over
// a time range against what the pool holds. Stretch by stretch, in time
// order, it places the pods the way the scheduler would (the capacity
// preview: the real DRA allocator on each node, nodes ranked as the
// Tiering plugin ranks them, tiers in firstAvailable order), a running pod
// staying where it was placed; from those placements it gives, per GPU
// model, the GPUs used over time, each transition's peak while its steps
// run, the loads that run on a fallback model, and every window where some
// pod finds no node, by count or by fragmentation.
// It reads no cluster and no clock: the caller gathers the inputs, from
// files (schedule-controller forecast) or from the API (kubectl rota
// forecast, the controller's Forecast condition).
package forecast
