// Package defrag is `kubectl rota defrag`: it plans the moves that would
// admit every waiting pod or gang, one after another (advisor.PlanAll over
// the snapshot advisor.Build makes from the listed objects, as the
// scheduler's WaitReason worker does), and carries them out through the
// Eviction API one workload at a time, re-planning after each and stopping
// at the first surprise. It never deletes a pod itself, and it evicts only
// the pods the plan names, by UID.
package defrag
