// Package targetguard is the admission webhook that keeps the schedule
// controller's token to the workloads DeploySchedules name.
//
// RBAC lets rota-schedule-controller update Deployments, StatefulSets and
// LeaderWorkerSets in every namespace, and the writes policy (a
// ValidatingAdmissionPolicy) narrows which fields and which namespaces; no
// policy can look up whether a DeploySchedule names the workload being
// written. The Guard can: the schedule controller serves it from its own
// DeploySchedule informer, and the API server sends it only that
// ServiceAccount's writes (the webhook configuration's match condition).
// A write is allowed when a DeploySchedule of the same namespace names the
// workload as a target, or, for a pinned ResourceClaimTemplate, binds a
// target to the reservation the copy is pinned to. Everything else is
// refused, with a message that says what is missing.
//
// EnsureCerts issues the webhook's serving certificate (a CA of its own and
// a leaf for the Service's DNS names), keeps it in a Secret, renews it
// before it expires and writes the CA into the webhook configuration's
// caBundle. It runs as a Job of its own ServiceAccount, so that the
// controller's token cannot rewrite the webhook that checks it.
package targetguard
