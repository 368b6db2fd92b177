package forecast

import (
	"bufio"
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func overWeek(t *testing.T) *Forecast {
	return runForecast(t, weekInput(t, addSDXL, map[string]*Load{"sdxl": {Name: week + "sdxl", Replica: gpus(4), Replicas: 1}}))
}

func TestJSONRecords(t *testing.T) {
	var b bytes.Buffer
	if err := WriteJSON(&b, overWeek(t), hcm); err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	sc := bufio.NewScanner(&b)
	var first map[string]any
	var lastCapacityTo string
	for sc.Scan() {
		var rec map[string]any
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		typ, _ := rec["type"].(string)
		counts[typ]++
		if typ == RecordCapacity {
			lastCapacityTo = rec["to"].(string)
		}
		if typ == RecordOvercommit && first == nil {
			first = rec
		}
	}
	// Demand changes at 08:00 and 18:00 on weekdays, and twice more on
	// Wednesday: 1 + 10 + 2 stretches.
	if counts[RecordCapacity] != 13 || counts[RecordOvercommit] != 7 || counts[RecordTransition] != 12 {
		t.Errorf("record counts %v, want capacity 13, overcommit 7, transition 12 (one model)", counts)
	}
	if lastCapacityTo != "2026-10-26T00:00:00+07:00" {
		t.Errorf("last capacity record ends %s", lastCapacityTo)
	}
	want := `{"capacity":10,"demand":14,"from":"2026-10-19T08:00:00+07:00","model":"H100","others":["serving/Deployment/md-bge-embed"],"reason":"count",` +
		`"targets":["serving/gpu-pool-h100-shared/llama70b","serving/gpu-pool-h100-shared/sdxl"],"to":"2026-10-19T18:00:00+07:00","type":"overcommit"}`
	if got, _ := json.Marshal(first); string(got) != want {
		t.Errorf("first over-commit\n%s\nwant\n%s", got, want)
	}
}

func TestTableNamesTheWindows(t *testing.T) {
	var b bytes.Buffer
	if err := WriteTable(&b, overWeek(t), hcm); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	var pool, maint bool
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		pool = pool || len(f) >= 3 && f[0] == "H100" && f[1] == "10" && f[2] == "gpu-node-0=10"
		maint = maint || strings.HasPrefix(line, "Wed 10-21 13:00") && strings.Contains(line, "Wed 10-21 15:00") &&
			strings.Contains(line, " 12/10 ") && strings.HasSuffix(line, "count   serving/gpu-pool-h100-shared/qwen32b, serving/gpu-pool-h100-shared/sdxl")
	}
	if !pool || !maint {
		t.Errorf("table lacks the pool line (%v) or Wednesday's maintenance over-commit (%v):\n%s", pool, maint, out)
	}
}
