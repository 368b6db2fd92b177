package v1alpha1

import "k8s.io/apimachinery/pkg/runtime/schema"

// LeaderWorkerSet (sigs.k8s.io/lws) is served by its own CRD. Rota drives it
// from DeploySchedules and resolves reservation membership through it, so
// its names live here, with Rota's other contract strings.
const (
	LeaderWorkerSetGroup        = "leaderworkerset.x-k8s.io"
	LeaderWorkerSetGroupVersion = LeaderWorkerSetGroup + "/v1"
	LeaderWorkerSetKind         = "LeaderWorkerSet"
	// LeaderWorkerSetNameLabel is set by the LeaderWorkerSet controller on
	// every pod of a set (leaders and workers).
	LeaderWorkerSetNameLabel = "leaderworkerset.sigs.k8s.io/name"
)

// LeaderWorkerSetsResource is the LeaderWorkerSet API, for the dynamic
// client.
var LeaderWorkerSetsResource = schema.GroupVersionResource{Group: LeaderWorkerSetGroup, Version: "v1", Resource: "leaderworkersets"}
