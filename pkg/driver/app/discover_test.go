package app

import (
	"bytes"
	"errors"
	"flag"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/klog/v2/ktesting"
	"sigs.k8s.io/yaml"

	"github.com/rota-dev/rota/pkg/driver/gpu"
)

func TestDiscoverMockPrintsSlice(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	var out bytes.Buffer
	o := DefaultOptions()
	o.NodeName, o.MockProfile = "node-x", "h100:1,l4:1"
	if err := Discover(ctx, o, &out); err != nil {
		t.Fatal(err)
	}
	header, body, _ := strings.Cut(out.String(), "\n")
	if want := "# 2 GPU(s) from mock profile h100:1,l4:1; driver 560.35.03 (published as 560.35.3), CUDA 12.6.0"; header != want {
		t.Errorf("header = %q, want %q", header, want)
	}
	var slice resourceapi.ResourceSlice
	if err := yaml.UnmarshalStrict([]byte(body), &slice); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range slice.Spec.Devices {
		got = append(got, d.Name+"="+*d.Attributes["model"].StringValue+"/"+*d.Attributes["uuid"].StringValue)
	}
	want := []string{"gpu-0=H100/" + gpu.MockUUID("node-x", 0), "gpu-1=L4/" + gpu.MockUUID("node-x", 1)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("devices (-want +got):\n%s", diff)
	}
	if slice.Spec.Driver != "gpu.rota.dev" || slice.Spec.Pool.Name != "node-x" || *slice.Spec.NodeName != "node-x" {
		t.Errorf("slice spec %+v", slice.Spec)
	}
}

func TestDiscoverWithoutDriver(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	o := DefaultOptions()
	o.NodeName = "node-x"
	err := Discover(ctx, o, &bytes.Buffer{})
	if err == nil {
		t.Skip("this machine has an NVIDIA driver")
	}
	if !errors.Is(err, gpu.ErrNoDriver) {
		t.Errorf("Discover without a driver = %v, want ErrNoDriver", err)
	}
}

func TestValidate(t *testing.T) {
	tests := map[string]struct {
		mod     func(*Options)
		wantErr string
	}{
		"ok":                 {mod: func(o *Options) { o.NodeName = "n" }},
		"no node":            {mod: func(o *Options) { o.NodeName = "" }, wantErr: "--node-name"},
		"fault without mock": {mod: func(o *Options) { o.NodeName, o.MockFaultFile = "n", "/f" }, wantErr: "--mock-fault-file needs --mock-profile"},
		"delay without mock": {mod: func(o *Options) { o.NodeName, o.MockTimeSliceDelay = "n", time.Second }, wantErr: "--mock-time-slice-delay needs --mock-profile"},
		"negative delay":     {mod: func(o *Options) { o.NodeName, o.MockProfile, o.MockTimeSliceDelay = "n", "dgx-h100", -time.Second }, wantErr: "must not be negative"},
		"no API rate":        {mod: func(o *Options) { o.NodeName, o.KubeAPIQPS = "n", 0 }, wantErr: "--kube-api-qps (0) must be above 0"},
		"no API burst":       {mod: func(o *Options) { o.NodeName, o.KubeAPIBurst = "n", 0 }, wantErr: "--kube-api-burst (0) at least 1"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			o := DefaultOptions()
			tc.mod(&o)
			err := o.Validate()
			if (tc.wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("Validate = %v, want %q", err, tc.wantErr)
			}
			if err == nil && o.CheckpointDir != o.PluginDataDir {
				t.Errorf("checkpoint dir %q does not default to the plugin data dir", o.CheckpointDir)
			}
		})
	}
}

// TestConsumableMemoryFlag: --consumable-memory is off by default and, when
// set, the slice that discover prints lets several claims share each GPU by
// its memory (the whole GPU when a claim asks for none).
func TestConsumableMemoryFlag(t *testing.T) {
	for _, args := range [][]string{nil, {"--consumable-memory"}} {
		t.Run(strings.Join(append([]string{"flags"}, args...), " "), func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			o := DefaultOptions()
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			o.AddFlags(fs)
			if err := fs.Parse(append([]string{"--node-name", "node-x", "--mock-profile", "h200:1"}, args...)); err != nil {
				t.Fatal(err)
			}
			on := len(args) > 0
			if o.ConsumableMemory != on {
				t.Fatalf("ConsumableMemory = %v after %v", o.ConsumableMemory, args)
			}
			var out bytes.Buffer
			if err := Discover(ctx, o, &out); err != nil {
				t.Fatal(err)
			}
			_, body, _ := strings.Cut(out.String(), "\n")
			var slice resourceapi.ResourceSlice
			if err := yaml.UnmarshalStrict([]byte(body), &slice); err != nil {
				t.Fatal(err)
			}
			d := slice.Spec.Devices[0]
			mem := d.Capacity["memory"]
			shared := d.AllowMultipleAllocations != nil && *d.AllowMultipleAllocations
			if shared != on || (mem.RequestPolicy != nil) != on {
				t.Errorf("allowMultipleAllocations %v, memory %+v; want sharing %v", d.AllowMultipleAllocations, mem, on)
			}
			if on && (mem.RequestPolicy.Default == nil || mem.RequestPolicy.Default.Cmp(mem.Value) != 0) {
				t.Errorf("memory request policy %+v, want the whole GPU (%s) by default", mem.RequestPolicy, mem.Value.String())
			}
		})
	}
}
