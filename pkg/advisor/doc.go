// Package advisor answers "what would unblock this waiting pod?". It is a
// pure engine over a Snapshot of the cluster (devices per node, the running
// workloads that hold them, disruption budgets, quotas, and the releases that
// DeploySchedules and reservations will make) and returns, for one waiting
// pod or gang, options ordered from the least disruptive: a lower tier free
// now (tier), the quota change that admits it (quota), the smallest set of
// running workloads to move or evict (move), the next time capacity frees by
// itself (wait), or, when no change within policy can admit it, none with the
// constraint that forbids each candidate placement.
//
// The engine never talks to an API server; Build turns listed objects into a
// Snapshot with the pool model of pkg/gpupool (and its CEL device matching).
// Its search is bounded by Options.MaxChecks; docs/admission.md ("Unblock
// advice") says what happens when the bound is reached.
package advisor
