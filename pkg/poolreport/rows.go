// Package poolreport assembles the GPU pool as `kubectl rota pool` reports
// it: one row per GPU joining the driver's ResourceSlices, the allocated
// ResourceClaims and the GPUReservations that hold devices.
package poolreport

import (
	"context"
	"fmt"
	"sort"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	rotav1alpha1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/pkg/gpupool"
)

// GPU is one GPU of the pool as `kubectl rota pool` shows it: where it is,
// what it is, whether it is healthy, which reservation holds it, which pods
// and tenants hold it, and for a shared GPU the VRAM used of its budget.
type GPU struct {
	Node        string `json:"node"`
	Device      string `json:"device"`
	Model       string `json:"model,omitempty"`
	UUID        string `json:"uuid,omitempty"`
	Health      string `json:"health"`
	Reservation string `json:"reservation,omitempty"`
	// ReservationPhase is the holding reservation's phase.
	ReservationPhase string   `json:"reservationPhase,omitempty"`
	Holders          []string `json:"holders,omitempty"`
	Tenants          []string `json:"tenants,omitempty"`
	Shared           bool     `json:"shared"`
	VRAMUsedMiB      int64    `json:"vramUsedMiB,omitempty"`
	VRAMMiB          int64    `json:"vramBudgetMiB,omitempty"`
}

// List reads the slices, claims and reservations and returns Rows.
func List(ctx context.Context, client kubernetes.Interface, dyn dynamic.Interface, driver string) ([]GPU, error) {
	slices, err := client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list ResourceSlices: %w", err)
	}
	claims, err := client.ResourceV1().ResourceClaims("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list ResourceClaims: %w", err)
	}
	// Reservations are optional: without the CRD (or the right to read it)
	// the column stays empty.
	var reservations []rotav1alpha1.GPUReservation
	if list, err := dyn.Resource(rotav1alpha1.GPUReservationsResource).Namespace("").List(ctx, metav1.ListOptions{}); err == nil {
		for _, item := range list.Items {
			var r rotav1alpha1.GPUReservation
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(item.Object, &r); err == nil {
				reservations = append(reservations, r)
			}
		}
	}
	return Rows(slices.Items, claims.Items, reservations, driver), nil
}

// Rows joins slices, claims and reservations into one row per GPU of
// driver, sorted by node and device. The join is the pool model's
// (pkg/gpupool).
func Rows(slices []resourceapi.ResourceSlice, claims []resourceapi.ResourceClaim, reservations []rotav1alpha1.GPUReservation, driver string) []GPU {
	var ofDriver []*resourceapi.ResourceSlice
	for i := range slices {
		if slices[i].Spec.Driver == driver {
			ofDriver = append(ofDriver, &slices[i])
		}
	}
	claimList := make([]*resourceapi.ResourceClaim, len(claims))
	for i := range claims {
		claimList[i] = &claims[i]
	}
	pool := gpupool.NewPool(ofDriver, claimList, nil)
	byUUID := reservationsByUUID(reservations)
	rows := make([]GPU, 0, len(pool.ByID))
	for _, d := range pool.Devices() {
		rows = append(rows, deviceRow(d, byUUID))
	}
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].Node != rows[j].Node {
			return rows[i].Node < rows[j].Node
		}
		return rows[i].Device < rows[j].Device
	})
	return rows
}

// holders lists who holds d: the consumers of each claim allocated it (or
// the claim, when it is reserved for no one), their namespaces, and the
// VRAM the claims consume.
func holders(d *gpupool.Device) (pods, tenants []string, usedMiB int64) {
	for _, a := range d.Allocations {
		for _, ref := range a.ReservedFor {
			pods = append(pods, a.Claim.Namespace+"/"+ref.Name)
		}
		if len(a.ReservedFor) == 0 {
			pods = append(pods, a.Claim.Namespace+"/(claim "+a.Claim.Name+")")
		}
		tenants = append(tenants, a.Claim.Namespace)
		if q, ok := a.Consumed[gpuv1.CapacityMemory]; ok {
			usedMiB += q.Value() >> 20
		}
	}
	return pods, tenants, usedMiB
}

// resv is the reservation holding a GPU and its VRAM budget per GPU.
type resv struct {
	name, phase string
	budgetMiB   int64
}

// reservationsByUUID indexes the GPUs the reservations hold by UUID.
func reservationsByUUID(reservations []rotav1alpha1.GPUReservation) map[string]resv {
	byUUID := map[string]resv{}
	for _, r := range reservations {
		for _, d := range r.Status.Devices {
			byUUID[d.UUID] = resv{name: r.Namespace + "/" + r.Name, phase: string(r.Status.Phase), budgetMiB: r.Status.BudgetMiBPerGPU}
		}
	}
	return byUUID
}

// deviceRow is the row of device d.
func deviceRow(d *gpupool.Device, byUUID map[string]resv) GPU {
	row := GPU{
		Node: d.Node, Device: d.Device.Name, Health: "Healthy",
		Model: d.Model(), UUID: d.UUID(), Shared: d.Shared(),
	}
	var taints []string
	for _, t := range d.Device.Taints {
		if t.Effect == resourceapi.DeviceTaintEffectNoSchedule || t.Effect == resourceapi.DeviceTaintEffectNoExecute {
			if t.Key == gpuv1.ReservedTaintKey {
				continue
			}
			taints = append(taints, strings.TrimSpace(t.Key+" "+t.Value))
		}
	}
	if len(taints) > 0 {
		row.Health = "Unhealthy(" + strings.Join(taints, ",") + ")"
	}
	if len(d.Allocations) > 0 {
		pods, tenants, used := holders(d)
		row.Holders, row.Tenants, row.VRAMUsedMiB = dedupe(pods), dedupe(tenants), used
	}
	if r, ok := byUUID[row.UUID]; ok {
		row.Reservation, row.ReservationPhase = r.name, r.phase
		if row.Shared {
			row.VRAMMiB = r.budgetMiB
		}
	}
	if row.Shared && row.VRAMMiB == 0 {
		if q, ok := d.Device.Capacity[gpuv1.CapacityMemory]; ok {
			row.VRAMMiB = q.Value.Value() >> 20
		}
	}
	return row
}

func dedupe(in []string) []string {
	sort.Strings(in)
	out := in[:0]
	for i, s := range in {
		if i == 0 || s != in[i-1] {
			out = append(out, s)
		}
	}
	return out
}
