package v1alpha1

// The Forecast condition of a DeploySchedule (docs/schedule.md, "Capacity
// forecast"): whether, over the next 7 days, the GPU pool holds what this
// schedule's targets ask for together with everything else that runs.
const (
	// ConditionForecast is the condition type.
	ConditionForecast = "Forecast"
	// ReasonForecastFits: no window over-commits the pool where this
	// schedule's targets run (status True).
	ReasonForecastFits = "FitsPool"
	// ReasonForecastOvercommitted: some window or transition asks for more
	// GPUs than the pool holds, by count or per node (status False); the
	// message names the first and the targets that collide.
	ReasonForecastOvercommitted = "Overcommitted"
	// ReasonForecastFailed: the forecast could not be computed (status
	// Unknown); the message says why.
	ReasonForecastFailed = "ForecastFailed"
)
