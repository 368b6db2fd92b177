package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
	rotav1alpha1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
	"github.com/rota-dev/rota/pkg/waits"
)

// gpuRow is one GPU of the pool.
type gpuRow struct {
	Node        string   `json:"node"`
	Device      string   `json:"device"`
	Model       string   `json:"model,omitempty"`
	UUID        string   `json:"uuid,omitempty"`
	Health      string   `json:"health"`
	Reservation string   `json:"reservation,omitempty"`
	Holders     []string `json:"holders,omitempty"`
	Tenants     []string `json:"tenants,omitempty"`
	Shared      bool     `json:"shared"`
	VRAMUsedMiB int64    `json:"vramUsedMiB,omitempty"`
	VRAMMiB     int64    `json:"vramBudgetMiB,omitempty"`
}

func newPoolCommand(o *options) *cobra.Command {
	var driver string
	cmd := &cobra.Command{
		Use:   "pool",
		Short: "Every node's GPUs: model, UUID, health, reservation, holder pod and tenant, VRAM of shared GPUs",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			client, dyn, _, err := o.clients()
			if err != nil {
				return err
			}
			rows, err := poolRows(cmd.Context(), client, dyn, driver)
			if err != nil {
				return err
			}
			if o.output == "json" {
				return writeJSON(o.streams.Out, rows)
			}
			return writePool(o.streams.Out, rows)
		},
	}
	cmd.Flags().StringVar(&driver, "driver", gpuv1.DriverName, "DRA driver whose devices are listed")
	return cmd
}

func poolRows(ctx context.Context, client kubernetes.Interface, dyn dynamic.Interface, driver string) ([]gpuRow, error) {
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
	return buildRows(slices.Items, claims.Items, reservations, driver), nil
}

// buildRows joins slices, claims and reservations into one row per GPU,
// sorted by node and device.
func buildRows(slices []resourceapi.ResourceSlice, claims []resourceapi.ResourceClaim, reservations []rotav1alpha1.GPUReservation, driver string) []gpuRow {
	type holder struct {
		pods    []string
		tenants []string
		usedMiB int64
	}
	held := map[string]*holder{}
	for _, c := range claims {
		if c.Status.Allocation == nil {
			continue
		}
		for _, r := range c.Status.Allocation.Devices.Results {
			if r.Driver != driver {
				continue
			}
			key := r.Pool + "/" + r.Device
			h := held[key]
			if h == nil {
				h = &holder{}
				held[key] = h
			}
			for _, ref := range c.Status.ReservedFor {
				h.pods = append(h.pods, c.Namespace+"/"+ref.Name)
			}
			if len(c.Status.ReservedFor) == 0 {
				h.pods = append(h.pods, c.Namespace+"/(claim "+c.Name+")")
			}
			h.tenants = append(h.tenants, c.Namespace)
			if q, ok := r.ConsumedCapacity[gpuv1.CapacityMemory]; ok {
				h.usedMiB += q.Value() >> 20
			}
		}
	}
	type resv struct {
		name      string
		budgetMiB int64
	}
	byUUID := map[string]resv{}
	for _, r := range reservations {
		for _, d := range r.Status.Devices {
			byUUID[d.UUID] = resv{name: r.Namespace + "/" + r.Name, budgetMiB: r.Status.BudgetMiBPerGPU}
		}
	}
	var rows []gpuRow
	for _, s := range slices {
		if s.Spec.Driver != driver || s.Spec.NodeName == nil {
			continue
		}
		for i := range s.Spec.Devices {
			d := &s.Spec.Devices[i]
			row := gpuRow{
				Node: *s.Spec.NodeName, Device: d.Name, Health: "Healthy",
				Model: waits.StringAttribute(d, driver, gpuv1.AttributeModel), UUID: waits.StringAttribute(d, driver, gpuv1.AttributeUUID),
				Shared: d.AllowMultipleAllocations != nil && *d.AllowMultipleAllocations,
			}
			var taints []string
			for _, t := range d.Taints {
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
			if h := held[s.Spec.Pool.Name+"/"+d.Name]; h != nil {
				row.Holders, row.Tenants, row.VRAMUsedMiB = dedupe(h.pods), dedupe(h.tenants), h.usedMiB
			}
			if r, ok := byUUID[row.UUID]; ok {
				row.Reservation = r.name
				if row.Shared {
					row.VRAMMiB = r.budgetMiB
				}
			}
			if row.Shared && row.VRAMMiB == 0 {
				if q, ok := d.Capacity[gpuv1.CapacityMemory]; ok {
					row.VRAMMiB = q.Value.Value() >> 20
				}
			}
			rows = append(rows, row)
		}
	}
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].Node != rows[j].Node {
			return rows[i].Node < rows[j].Node
		}
		return rows[i].Device < rows[j].Device
	})
	return rows
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

func writePool(w io.Writer, rows []gpuRow) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tDEVICE\tMODEL\tUUID\tHEALTH\tRESERVATION\tHOLDER\tVRAM MiB")
	for _, r := range rows {
		holder := "-"
		if len(r.Holders) > 0 {
			holder = strings.Join(r.Holders, ",")
		}
		vram := "-"
		if r.Shared {
			vram = fmt.Sprintf("%d/%d", r.VRAMUsedMiB, r.VRAMMiB)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Node, r.Device, dash(r.Model), dash(r.UUID), r.Health, dash(r.Reservation), holder, vram)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write table: %w", err)
	}
	return nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
