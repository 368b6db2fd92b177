package validation

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
)

func TestValidateDeploySchedule(t *testing.T) {
	testCases := map[string]struct {
		mutate func(ds *v1alpha1.DeploySchedule)
		want   []string
	}{
		"the documented example is valid": {mutate: func(*v1alpha1.DeploySchedule) {}},
		"defaulted fields may be empty":   {mutate: func(ds *v1alpha1.DeploySchedule) { ds.Spec.Mode, ds.Spec.TransitionOrder = "", "" }},
		"missing name": {
			mutate: func(ds *v1alpha1.DeploySchedule) { ds.Name = "" },
			want:   []string{"metadata.name: Required value"},
		},
		"missing time zone": {
			mutate: func(ds *v1alpha1.DeploySchedule) { ds.Spec.TimeZone = "" },
			want:   []string{"spec.timeZone: Required value"},
		},
		"unknown time zone": {
			mutate: func(ds *v1alpha1.DeploySchedule) { ds.Spec.TimeZone = "Mars/Olympus_Mons" },
			want:   []string{"spec.timeZone: Invalid value"},
		},
		"Local is the machine's zone, not an IANA name": {
			mutate: func(ds *v1alpha1.DeploySchedule) { ds.Spec.TimeZone = "Local" },
			want:   []string{"spec.timeZone: Invalid value"},
		},
		"unsupported mode and order": {
			mutate: func(ds *v1alpha1.DeploySchedule) { ds.Spec.Mode, ds.Spec.TransitionOrder = "Sometimes", "Random" },
			want:   []string{"spec.mode: Unsupported value", "spec.transitionOrder: Unsupported value"},
		},
		"negative timeout": {
			mutate: func(ds *v1alpha1.DeploySchedule) {
				d := v1alpha1.Duration("-5m")
				ds.Spec.Timeouts = &v1alpha1.ScheduleTimeouts{Capacity: &d}
			},
			want: []string{"spec.timeouts.capacity: Invalid value"},
		},
		"no targets": {
			mutate: func(ds *v1alpha1.DeploySchedule) { ds.Spec.Targets, ds.Spec.Windows = nil, nil },
			want:   []string{"spec.targets: Required value"},
		},
		"target name, kind and workload name": {
			mutate: func(ds *v1alpha1.DeploySchedule) {
				ds.Spec.Targets[1].Name = "Qwen_32B"
				ds.Spec.Targets[1].WorkloadRef.Kind = "Pod"
				ds.Spec.Targets[1].WorkloadRef.Name = ""
				ds.Spec.Windows = nil
			},
			want: []string{
				"spec.targets[1].name: Invalid value",
				"spec.targets[1].workloadRef.name: Required value",
				"spec.targets[1].workloadRef.kind: Unsupported value",
			},
		},
		"duplicate target and workload": {
			mutate: func(ds *v1alpha1.DeploySchedule) {
				ds.Spec.Targets[1] = ds.Spec.Targets[0]
				ds.Spec.Windows = nil
			},
			want: []string{"spec.targets[1].name: Duplicate value", "spec.targets[1].workloadRef: Invalid value"},
		},
		"missing default state": {
			mutate: func(ds *v1alpha1.DeploySchedule) { ds.Spec.Targets[0].DefaultState = "" },
			want:   []string{"spec.targets[0].defaultState: Required value"},
		},
		"default replicas zero": {
			mutate: func(ds *v1alpha1.DeploySchedule) { ds.Spec.Targets[1].DefaultReplicas = replicas(0) },
			want:   []string{"spec.targets[1].defaultReplicas: Invalid value"},
		},
		"default replicas on a stopped default": {
			mutate: func(ds *v1alpha1.DeploySchedule) { ds.Spec.Targets[0].DefaultReplicas = replicas(2) },
			want:   []string{"spec.targets[0].defaultReplicas: Forbidden"},
		},
		"window with neither recurring nor oneShot": {
			mutate: func(ds *v1alpha1.DeploySchedule) { ds.Spec.Windows[0].Recurring = nil },
			want:   []string{"spec.windows[0]: Required value"},
		},
		"window with both recurring and oneShot": {
			mutate: func(ds *v1alpha1.DeploySchedule) {
				ds.Spec.Windows[0].OneShot = ds.Spec.Windows[1].OneShot
			},
			want: []string{"spec.windows[0].oneShot: Forbidden"},
		},
		"unparsable cron": {
			mutate: func(ds *v1alpha1.DeploySchedule) { ds.Spec.Windows[0].Recurring.Cron = "0 25 * * *" },
			want:   []string{"spec.windows[0].recurring.cron: Invalid value"},
		},
		"cron with a seconds field": {
			mutate: func(ds *v1alpha1.DeploySchedule) { ds.Spec.Windows[0].Recurring.Cron = "0 0 8 * * 1-5" },
			want:   []string{"spec.windows[0].recurring.cron: Invalid value"},
		},
		"cron with a TZ prefix": {
			mutate: func(ds *v1alpha1.DeploySchedule) { ds.Spec.Windows[0].Recurring.Cron = "CRON_TZ=UTC 0 8 * * 1-5" },
			want:   []string{"spec.windows[0].recurring.cron: Invalid value"},
		},
		"missing cron and duration": {
			mutate: func(ds *v1alpha1.DeploySchedule) { ds.Spec.Windows[0].Recurring = &v1alpha1.RecurringWindow{} },
			want:   []string{"spec.windows[0].recurring.cron: Required value", "spec.windows[0].recurring.duration: Required value"},
		},
		"duration in words": {
			mutate: func(ds *v1alpha1.DeploySchedule) { ds.Spec.Windows[0].Recurring.Duration = "10 hours" },
			want:   []string{"spec.windows[0].recurring.duration: Invalid value"},
		},
		"zero duration": {
			mutate: func(ds *v1alpha1.DeploySchedule) { ds.Spec.Windows[0].Recurring.Duration = "0s" },
			want:   []string{"spec.windows[0].recurring.duration: Invalid value"},
		},
		"negative duration": {
			mutate: func(ds *v1alpha1.DeploySchedule) { ds.Spec.Windows[0].Recurring.Duration = "-1h" },
			want:   []string{"spec.windows[0].recurring.duration: Invalid value"},
		},
		"priority out of range and duplicate window name": {
			mutate: func(ds *v1alpha1.DeploySchedule) {
				ds.Spec.Windows[1].Priority = -1
				ds.Spec.Windows[1].Name = ds.Spec.Windows[0].Name
			},
			want: []string{"spec.windows[1].name: Duplicate value", "spec.windows[1].priority: Invalid value"},
		},
		"one-shot ends before it starts": {
			mutate: func(ds *v1alpha1.DeploySchedule) {
				ds.Spec.Windows[1].OneShot = oneShot("2026-10-21T15:00:00+07:00", "2026-10-21T13:00:00+07:00")
			},
			want: []string{"spec.windows[1].oneShot.activeUntil: Invalid value"},
		},
		"one-shot without times": {
			mutate: func(ds *v1alpha1.DeploySchedule) { ds.Spec.Windows[1].OneShot = &v1alpha1.OneShotWindow{} },
			want:   []string{"spec.windows[1].oneShot.activeFrom: Required value", "spec.windows[1].oneShot.activeUntil: Required value"},
		},
		"window without states": {
			mutate: func(ds *v1alpha1.DeploySchedule) { ds.Spec.Windows[1].States = nil },
			want:   []string{"spec.windows[1].states: Required value"},
		},
		"replicas zero": {
			mutate: func(ds *v1alpha1.DeploySchedule) { ds.Spec.Windows[0].States[0].Replicas = replicas(0) },
			want:   []string{"spec.windows[0].states[0].replicas: Invalid value"},
		},
		"replicas on a stopped state": {
			mutate: func(ds *v1alpha1.DeploySchedule) { ds.Spec.Windows[0].States[1].Replicas = replicas(1) },
			want:   []string{"spec.windows[0].states[1].replicas: Forbidden"},
		},
		"state naming an undeclared target": {
			mutate: func(ds *v1alpha1.DeploySchedule) { ds.Spec.Windows[1].States[1].Target = "mistral" },
			want:   []string{"spec.windows[1].states[1].target: Invalid value"},
		},
		"two states for one target and an unknown state": {
			mutate: func(ds *v1alpha1.DeploySchedule) {
				ds.Spec.Windows[0].States[1].Target = "llama70b"
				ds.Spec.Windows[0].States[1].DesiredState = "Paused"
			},
			want: []string{"spec.windows[0].states[1].target: Duplicate value", "spec.windows[0].states[1].desiredState: Unsupported value"},
		},
		"too many windows": {
			mutate: func(ds *v1alpha1.DeploySchedule) {
				w := ds.Spec.Windows[0]
				ds.Spec.Windows = nil
				for i := range maxWindows + 1 {
					w := *w.DeepCopy()
					w.Name = "w" + string(rune('a'+i/26)) + string(rune('a'+i%26))
					w.Priority = int32(i)
					ds.Spec.Windows = append(ds.Spec.Windows, w)
				}
			},
			want: []string{"spec.windows: Too many"},
		},
	}
	for name, tc := range testCases {
		t.Run(name, func(t *testing.T) {
			ds := specExample()
			tc.mutate(ds)
			got := ValidateDeploySchedule(ds)
			if diff := cmp.Diff(tc.want, summarize(got)); diff != "" {
				t.Errorf("errors (-want +got):\n%s\nall: %v", diff, got)
			}
		})
	}
}

func TestValidateDeployScheduleNil(t *testing.T) {
	if got := ValidateDeploySchedule(nil); len(got) != 1 || got[0].Type != field.ErrorTypeRequired {
		t.Errorf("ValidateDeploySchedule(nil) = %v, want one Required error", got)
	}
}
