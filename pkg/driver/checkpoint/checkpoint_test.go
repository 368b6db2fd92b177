package checkpoint

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"
)

func sample() *Checkpoint {
	cp := New("boot-1")
	cp.Claims["uid-1"] = Claim{UID: "uid-1", Namespace: "ns", Name: "c1", State: PrepareCompleted, Devices: []Device{
		{Requests: []string{"gpu"}, Pool: "node-a", Device: "gpu-0", UUID: "GPU-0", Minor: 0, Strategy: "Exclusive"},
	}}
	cp.Claims["uid-2"] = Claim{UID: "uid-2", Namespace: "ns", Name: "c2", State: PrepareStarted, Devices: []Device{
		{Pool: "node-a", Device: "gpu-1", UUID: "GPU-1", Minor: 1, Strategy: "TimeSlicing", TimeSlice: "Long", MemoryMiB: ptr.To[int64](1024)},
	}}
	cp.TimeSlices["GPU-1"] = "Long"
	return cp
}

func TestRoundTrip(t *testing.T) {
	store := testStore(t, t.TempDir())
	if err := store.Save(sample()); err != nil {
		t.Fatal(err)
	}
	got, err := store.Load("boot-1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(sample(), got); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
}

func TestLoadMissingIsEmpty(t *testing.T) {
	store := testStore(t, t.TempDir())
	got, err := store.Load("boot-7")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(New("boot-7"), got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestCorrupt(t *testing.T) {
	good, err := Encode(sample())
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]func([]byte) []byte{
		"truncated":         func(b []byte) []byte { return b[:len(b)/2] },
		"flipped payload":   func(b []byte) []byte { return []byte(strings.Replace(string(b), "GPU-0", "GPU-9", 1)) },
		"newer version":     func(b []byte) []byte { return []byte(strings.Replace(string(b), `"version":1`, `"version":2`, 1)) },
		"empty":             func([]byte) []byte { return nil },
		"zeroes (no fsync)": func(b []byte) []byte { return make([]byte, len(b)) },
	}
	for name, mutate := range tests {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			store := testStore(t, dir)
			if err := os.WriteFile(store.Path(), mutate(good), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err = store.Load("boot-1")
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Load = %v, want ErrCorrupt", err)
			}
			if !strings.Contains(err.Error(), "To recover") {
				t.Errorf("error does not say how to recover: %v", err)
			}
		})
	}
}

func TestCheckRejectsInconsistentPayload(t *testing.T) {
	cp := sample()
	c := cp.Claims["uid-1"]
	c.UID = "other"
	cp.Claims["uid-1"] = c
	raw, err := Encode(cp)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Decode(raw); !errors.Is(err, ErrCorrupt) {
		t.Errorf("Decode = %v, want ErrCorrupt", err)
	}
}

// TestLockExcludesOtherHolders: a second holder (another open file, as in a
// second plugin instance) waits until the first unlocks, and gives up with
// its context.
func TestLockExcludesOtherHolders(t *testing.T) {
	dir := t.TempDir()
	a := testStore(t, dir)
	b := testStore(t, dir)
	unlockA, err := a.Lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := b.Lock(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second Lock while held = %v, want a context deadline error", err)
	}
	got := make(chan error, 1)
	go func() {
		unlockB, err := b.Lock(context.Background())
		if err == nil {
			unlockB()
		}
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("second Lock returned %v while the first still holds it", err)
	case <-time.After(50 * time.Millisecond):
	}
	unlockA()
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("second Lock after unlock: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("second Lock still waiting after the first unlocked")
	}
}
