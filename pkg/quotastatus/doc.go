// Package quotastatus is the GPUQuota status controller. It keeps every
// GPUQuota's status true: per model of its spec, the tenant's guarantee
// and the GPUs it uses, borrows and lends, and the condition
// GuaranteesFit, which says whether the guarantees of every tenant fit the
// pool's healthy GPUs of each of those models (GPUs a GPUReservation holds
// counted once, within its namespace's guarantee), with the numbers.
//
// The accounting itself is pkg/gpuquota's (Account); this package reads
// its inputs from the binary's informers (pkg/gpupool for the devices and
// their allocations, pkg/usage's charge rule for what each tenant uses,
// each GPUReservation's status for the GPUs it holds) and writes the
// status through the status subresource, only when it changes.
package quotastatus
