// Package forecast sets what DeploySchedules will ask of the GPU pool over
// a time range against what the pool holds: per GPU model, demand over
// time, each transition's peak while release-first executes it, and every
// window where demand exceeds capacity, by count or because the pods do not
// pack onto nodes (checked with the capacity preview's real DRA allocator).
// It reads no cluster and no clock: the caller gathers the inputs, from
// files (schedule-controller forecast) or from the API (kubectl rota
// forecast, the controller's Forecast condition).
package forecast
