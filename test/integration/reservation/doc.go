// Package reservation holds the integration tests of GPU reservations: the
// GPUReservation controller, the Reservation scheduler plugin in Rota's
// shipped scheduler configuration, and the admission policy, against a real
// kube-apiserver.
package reservation
