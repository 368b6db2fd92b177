// Package controller executes DeploySchedules (docs/schedule.md): on every pass it
// evaluates a schedule with pkg/schedule at the injected clock's now, opens a
// transition only when a target's intent interval is new, and drives the
// transition's release and acquire steps to convergence or to a terminal reason
// with a fix text.
//
// In-process API (used by cmd/schedule-controller and by the sandbox):
//
//	dynFactory := dynamicinformer.NewDynamicSharedInformerFactory(dynamicClient, 0)
//	c, err := controller.New(controller.Options{
//		Client:     kubeClient,    // kubernetes.Interface
//		Dynamic:    dynamicClient, // dynamic.Interface (DeploySchedules, GPUReservations, LeaderWorkerSets)
//		Clock:      clk,           // k8s.io/utils/clock.WithTicker; a fake clock drives virtual time
//		Recorder:   recorder,      // events on DeploySchedules; the binary's one broadcaster (pkg/events)
//		DynFactory: dynFactory,    // the caller's; New takes the DeploySchedule informer from it
//		GateNamespace: "rota-system",
//	})
//	dynFactory.Start(ctx.Done())   // the caller starts (and shuts down) its factories
//	go c.Run(ctx, workers)         // work queue until ctx ends; returns once the workers have
//	requeue, err := c.Reconcile(ctx, namespace, name) // one pass, for tests and benchmarks
//
// One pass is one call down the package, one file per step, in the order of
// docs/schedule.md ("How the controller is laid out"): pass.go calls
// gate.go, ownership.go, eligibility.go, plan.go, then (transition.go)
// preflight.go, release.go, acquire.go and converge.go, then status.go.
//
// Crash safety: each step is written to status as Submitting with its
// idempotency key (schedule UID / target / interval start / step) before the
// workload is changed, with optimistic concurrency on the status. The workload
// update carries the key in the annotation rota.dev/transition-key, so a
// controller that finds a step still Submitting recognises a mutation that
// already happened and never applies it twice. Leader election only avoids
// wasted work; correctness rests on the two compare-and-swaps.
//
// Failpoints lets tests stop a pass between Submitting and the mutation, and
// between the mutation and Accepted, without sleeping.
package controller
