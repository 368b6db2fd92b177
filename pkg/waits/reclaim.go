package waits

import (
	"fmt"
	"strings"
	"time"
)

// ReclaimDetail is what a reclaim does for a waiting pod, as the Reclaim
// plugin writes it in the pod's rota.dev/reclaim annotation (JSON) and
// `kubectl rota why` prints it (docs/admission.md, "Guarantees, borrowing
// and reclaim").
type ReclaimDetail struct {
	// Tenant is the waiting pod's namespace; Unit its pod or gang.
	Tenant string `json:"tenant"`
	Unit   string `json:"unit"`
	Model  string `json:"model"`
	// Need is what the unit asks of the model; Used and Guaranteed are its
	// tenant's numbers when the reclaim started.
	Need       int             `json:"need"`
	Used       int             `json:"used"`
	Guaranteed int             `json:"guaranteed"`
	Started    time.Time       `json:"started"`
	Victims    []ReclaimVictim `json:"victims"`
}

// ReclaimVictim is one workload a reclaim evicts.
type ReclaimVictim struct {
	// Workload is "namespace/pod" or "namespace/gang:<name>"; Pods its pods.
	Workload string   `json:"workload"`
	Pods     []string `json:"pods"`
	GPUs     int      `json:"gpus"`
	// GraceUntil is when its checkpoint grace ends, for a workload that
	// declares a checkpoint.
	GraceUntil *time.Time `json:"graceUntil,omitempty"`
}

// Describe says what the reclaim does at now, with each victim's state:
// "reclaiming 4 H100 for team-a's guarantee (holds 0 of 8, needs 4) from
// borrowers team-b/b-7 (2 GPUs; checkpoint grace 1m12s left), team-b/b-6
// (2 GPUs; evicting)". gone reports a victim whose pods are all gone.
func (d ReclaimDetail) Describe(now time.Time, gone func(ReclaimVictim) bool) string {
	parts := make([]string, 0, len(d.Victims))
	taken := 0
	for _, v := range d.Victims {
		taken += v.GPUs
		state := "evicting"
		switch {
		case gone != nil && gone(v):
			state = "evicted"
		case v.GraceUntil != nil && now.Before(*v.GraceUntil):
			state = fmt.Sprintf("checkpoint grace %s left", v.GraceUntil.Sub(now).Round(time.Second))
		}
		parts = append(parts, fmt.Sprintf("%s (%d GPUs; %s)", v.Workload, v.GPUs, state))
	}
	return fmt.Sprintf("reclaiming %d %s for %s's guarantee (holds %d of %d, needs %d) from borrowers %s",
		taken, d.Model, d.Tenant, d.Used, d.Guaranteed, d.Need, strings.Join(parts, ", "))
}
