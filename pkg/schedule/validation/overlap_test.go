package validation

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
)

func TestValidateOneShotOverlaps(t *testing.T) {
	second := func(priority int32, from, until string, target string) v1alpha1.ScheduleWindow {
		return v1alpha1.ScheduleWindow{
			Name: "maint-second", Priority: priority, OneShot: oneShot(from, until),
			States: []v1alpha1.TargetState{{Target: target, DesiredState: v1alpha1.StateStopped}},
		}
	}
	testCases := map[string]struct {
		window     v1alpha1.ScheduleWindow
		want       []string
		wantDetail string
	}{
		"equal priority, same target, overlapping": {
			window:     second(100, "2026-10-21T14:00:00+07:00", "2026-10-21T16:00:00+07:00", "llama70b"),
			want:       []string{"spec.windows[2]: Invalid value"},
			wantDetail: `windows "maint-wed" (spec.windows[1]) and "maint-second" (spec.windows[2]) have the same priority 100 and are both active for target "llama70b" at 2026-10-21T14:00:00+07:00`,
		},
		"touching windows do not overlap (half-open)": {
			window: second(100, "2026-10-21T15:00:00+07:00", "2026-10-21T16:00:00+07:00", "llama70b"),
		},
		"different priorities may overlap": {
			window: second(101, "2026-10-21T14:00:00+07:00", "2026-10-21T16:00:00+07:00", "llama70b"),
		},
	}
	for name, tc := range testCases {
		t.Run(name, func(t *testing.T) {
			ds := specExample()
			ds.Spec.Windows = append(ds.Spec.Windows, tc.window)
			got := ValidateDeploySchedule(ds)
			if diff := cmp.Diff(tc.want, summarize(got)); diff != "" {
				t.Fatalf("errors (-want +got):\n%s", diff)
			}
			if tc.wantDetail != "" && !strings.Contains(got[0].Detail, tc.wantDetail) {
				t.Errorf("detail %q does not contain %q", got[0].Detail, tc.wantDetail)
			}
		})
	}
}

func TestValidateDeployScheduleInRange(t *testing.T) {
	hcm, err := time.LoadLocation("Asia/Ho_Chi_Minh")
	if err != nil {
		t.Fatal(err)
	}
	at := func(s string) time.Time {
		ts, err := time.ParseInLocation("2006-01-02 15:04", s, hcm)
		if err != nil {
			t.Fatal(err)
		}
		return ts
	}
	lunch := v1alpha1.ScheduleWindow{
		Name: "lunch", Priority: 10,
		Recurring: &v1alpha1.RecurringWindow{Cron: "0 12 * * *", Duration: "1h"},
		States:    []v1alpha1.TargetState{{Target: "qwen32b", DesiredState: v1alpha1.StateRunning}},
	}
	weekend := v1alpha1.ScheduleWindow{
		Name: "weekend", Priority: 10,
		Recurring: &v1alpha1.RecurringWindow{Cron: "0 0 * * 6", Duration: "48h"},
		States:    []v1alpha1.TargetState{{Target: "llama70b", DesiredState: v1alpha1.StateStopped}},
	}
	testCases := map[string]struct {
		mutate     func(ds *v1alpha1.DeploySchedule)
		from, to   string
		want       []string
		wantDetail string
	}{
		"the documented example over its week": {
			mutate: func(*v1alpha1.DeploySchedule) {}, from: "2026-10-19 00:00", to: "2026-10-26 00:00",
		},
		"one-shot at equal priority inside business hours": {
			mutate: func(ds *v1alpha1.DeploySchedule) { ds.Spec.Windows[1].Priority = 10 },
			from:   "2026-10-19 00:00", to: "2026-10-26 00:00",
			want:       []string{"spec.windows[1]: Invalid value"},
			wantDetail: `windows "business-hours" (spec.windows[0]) and "maint-wed" (spec.windows[1]) have the same priority 10 and are both active for target "llama70b" at 2026-10-21T13:00:00+07:00`,
		},
		"the same, outside the evaluated range": {
			mutate: func(ds *v1alpha1.DeploySchedule) { ds.Spec.Windows[1].Priority = 10 },
			from:   "2026-10-22 00:00", to: "2026-10-26 00:00",
		},
		"two recurring windows at equal priority": {
			mutate: func(ds *v1alpha1.DeploySchedule) { ds.Spec.Windows = append(ds.Spec.Windows, lunch) },
			from:   "2026-10-17 00:00", to: "2026-10-26 00:00",
			want: []string{"spec.windows[2]: Invalid value"},
			// Saturday's lunch does not meet business hours; Monday's does.
			wantDetail: `windows "business-hours" (spec.windows[0]) and "lunch" (spec.windows[2]) have the same priority 10 and are both active for target "qwen32b" at 2026-10-19T12:00:00+07:00`,
		},
		"equal priority that never meets": {
			mutate: func(ds *v1alpha1.DeploySchedule) { ds.Spec.Windows = append(ds.Spec.Windows, weekend) },
			from:   "2026-10-01 00:00", to: "2027-01-01 00:00",
		},
		"invalid schedules report their static errors": {
			mutate: func(ds *v1alpha1.DeploySchedule) { ds.Spec.TimeZone = "Nowhere/Special" },
			from:   "2026-10-19 00:00", to: "2026-10-26 00:00",
			want: []string{"spec.timeZone: Invalid value"},
		},
	}
	for name, tc := range testCases {
		t.Run(name, func(t *testing.T) {
			ds := specExample()
			tc.mutate(ds)
			got := ValidateDeployScheduleInRange(ds, at(tc.from), at(tc.to))
			if diff := cmp.Diff(tc.want, summarize(got)); diff != "" {
				t.Fatalf("errors (-want +got):\n%s\nall: %v", diff, got)
			}
			if tc.wantDetail != "" && !strings.Contains(got[0].Detail, tc.wantDetail) {
				t.Errorf("detail %q does not contain %q", got[0].Detail, tc.wantDetail)
			}
		})
	}
}
