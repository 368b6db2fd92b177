package checkpoint

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"
)

// A Load that is served without decoding still hands the caller a checkpoint
// of its own: what the caller changes never shows in the next Load.
func TestLoadReturnsACopyTheCallerOwns(t *testing.T) {
	store := testStore(t, t.TempDir())
	if err := store.Save(sample()); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		got, err := store.Load("boot-1")
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(sample(), got); diff != "" {
			t.Fatalf("Load %d (-want +got):\n%s", i, diff)
		}
		got.BootID = "changed"
		got.Claims["uid-3"] = Claim{UID: "uid-3"}
		got.Claims["uid-1"].Devices[0].Requests[0] = "changed"
		*got.Claims["uid-2"].Devices[0].MemoryMiB = 7
		got.TimeSlices["GPU-1"] = "Short"
	}
}

// The same holds for the checkpoint a caller saved: changing it after Save
// does not change what Load returns.
func TestSaveKeepsNoReferenceToTheCallersCheckpoint(t *testing.T) {
	store := testStore(t, t.TempDir())
	cp := sample()
	if err := store.Save(cp); err != nil {
		t.Fatal(err)
	}
	cp.Claims["uid-1"].Devices[0].Requests[0] = "changed"
	delete(cp.Claims, "uid-2")
	got, err := store.Load("boot-1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(sample(), got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// Another writer of the file (the second plugin of a rolling update) is
// seen at the next Load, and so is a file damaged after this Store read it.
func TestLoadSeesEveryChangeOfTheFile(t *testing.T) {
	dir := t.TempDir()
	mine := testStore(t, dir)
	other := testStore(t, dir)
	if err := mine.Save(sample()); err != nil {
		t.Fatal(err)
	}
	if _, err := mine.Load("boot-1"); err != nil {
		t.Fatal(err)
	}
	theirs := sample()
	delete(theirs.Claims, "uid-1")
	if err := other.Save(theirs); err != nil {
		t.Fatal(err)
	}
	got, err := mine.Load("boot-1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(theirs, got); diff != "" {
		t.Errorf("after the other writer (-want +got):\n%s", diff)
	}
	raw, err := os.ReadFile(mine.Path())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(mine.Path(), bytes.Replace(raw, []byte("GPU-1"), []byte("GPU-9"), 1), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := mine.Load("boot-1"); !errors.Is(err, ErrCorrupt) {
		t.Errorf("Load of a damaged file = %v, want ErrCorrupt", err)
	}
}

// Checkpoints written before the envelope became compact had the payload
// indented with it; they still load.
func TestDecodesTheIndentedFormat(t *testing.T) {
	raw, err := Encode(sample())
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(raw, []byte("\n  ")) {
		t.Fatalf("Encode wrote an indented checkpoint:\n%s", raw)
	}
	var indented bytes.Buffer
	if err := json.Indent(&indented, bytes.TrimSpace(raw), "", "  "); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(indented.String(), `"version": 1`) {
		t.Fatalf("not the indented format:\n%s", indented.String())
	}
	got, err := Decode(indented.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(sample(), got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// testStore is NewStore(dir), failing tb on an error.
func testStore(tb testing.TB, dir string) *Store {
	tb.Helper()
	s, err := NewStore(dir)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// benchCheckpoint is a node with 32 time-sliced claims on 8 GPUs.
func benchCheckpoint() *Checkpoint {
	cp := New("boot-1")
	for i := range 32 {
		uid := fmt.Sprintf("0b8c7a52-3f1e-4d6a-9a57-%012d", i)
		gpu := fmt.Sprintf("gpu-%d", i%8)
		cp.Claims[uid] = Claim{UID: uid, Namespace: "bench", Name: fmt.Sprintf("c%02d", i), State: PrepareCompleted, Devices: []Device{{
			Requests: []string{"gpu"}, Pool: "node-bench", Device: gpu, UUID: "GPU-" + uid, Minor: i % 8,
			Strategy: "TimeSlicing", TimeSlice: "Medium", MemoryMiB: ptr.To[int64](16384),
		}}}
		cp.TimeSlices["GPU-"+uid] = "Medium"
	}
	return cp
}

// BenchmarkLoad reads a 32-claim checkpoint that has not changed since this
// Store wrote it (every batch of the state machine starts so), and one that
// another writer wrote (decoded in full).
func BenchmarkLoad(b *testing.B) {
	dir := b.TempDir()
	store := testStore(b, dir)
	if err := store.Save(benchCheckpoint()); err != nil {
		b.Fatal(err)
	}
	b.Run("unchanged", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := store.Load("boot-1"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("written-by-another", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			fresh := testStore(b, dir)
			if _, err := fresh.Load("boot-1"); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkEncode serialises a 32-claim checkpoint, as every Save does.
func BenchmarkEncode(b *testing.B) {
	cp := benchCheckpoint()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Encode(cp); err != nil {
			b.Fatal(err)
		}
	}
}
