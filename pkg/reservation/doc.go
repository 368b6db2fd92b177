// Package reservation holds what a GPUReservation means, as pure functions
// the scheduler's Reservation plugin and the GPUReservation controller
// (pkg/reservation/controller) both apply: the taint value and toleration
// that reach a reservation's GPUs, membership resolved from a pod's owner
// (never from its labels), the VRAM budget and a claim's declared memory, and
// conversion from what the dynamic client returns. It talks to no API server.
package reservation
