// Package v1alpha1 is Rota's wire contract with the cluster: every name that
// another process, a manifest or a user can see. The DRA driver name and the
// device attributes and capacity it publishes, the device taint keys, the
// labels, annotations, finalizers and pod condition Rota reads or writes,
// and GpuConfig (apiVersion gpu.rota.dev/v1alpha1), the opaque device
// configuration a DeviceClass or a ResourceClaim carries.
//
// GpuConfig is not served by the API server: the driver decodes it strictly
// at prepare time and fails the claim with a field path when it is wrong, and
// the scheduler and the controllers decode it with the same code.
//
// Nothing else in Rota spells these strings: contract_test.go fails when one
// appears as a literal outside pkg/apis. This package imports nothing of
// Rota's (docs/architecture.md, "Package map").
package v1alpha1
