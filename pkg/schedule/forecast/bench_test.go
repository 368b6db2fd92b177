package forecast

import (
	"context"
	"fmt"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
)

// BenchmarkForecastWeek forecasts a week of 50 copies of the week-swap
// scenario's schedule (docs/design.md#scenario-week-swap; 100 targets: 8 and 6 GPUs, swapped every weekday 08:00 and
// 18:00, plus Wednesday's maintenance) with 20 always-running 2-GPU
// workloads on 64 nodes of 8 H100s: what the controller computes at most
// once a minute for its Forecast condition.
func BenchmarkForecastWeek(b *testing.B) {
	ds, compiled := weekSchedule(b, nil)
	in := Input{From: at(19, 0, 0), To: at(26, 0, 0), Classes: []*resourceapi.DeviceClass{gpuClass()}}
	for i := range 50 {
		name := fmt.Sprintf("%s-%d", ds.Name, i)
		prefix := "serving/" + name + "/"
		in.Schedules = append(in.Schedules, Schedule{Namespace: "serving", Name: name, Compiled: compiled, Targets: map[string]*Load{
			"llama70b": {Name: prefix + "llama70b", Replica: gpus(8), Replicas: 1},
			"qwen32b":  {Name: prefix + "qwen32b", Replica: gpus(6), Replicas: 1},
		}})
	}
	for i := range 20 {
		in.Always = append(in.Always, Load{Name: fmt.Sprintf("serving/Deployment/embed-%d", i), Replica: gpus(2), Replicas: 1})
	}
	for i := range 64 {
		in.Slices = append(in.Slices, nodeSlice(fmt.Sprintf("node-%02d", i), "H100", 8))
	}
	b.ReportAllocs()
	for b.Loop() {
		f, err := Run(context.Background(), in)
		if err != nil {
			b.Fatal(err)
		}
		if len(f.Overcommits) != 0 || len(f.Transitions) != 600 {
			b.Fatalf("%d over-commits, %d transitions; want 0 and 600", len(f.Overcommits), len(f.Transitions))
		}
	}
}
