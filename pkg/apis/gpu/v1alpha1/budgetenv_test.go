package v1alpha1

import "testing"

func TestMemoryFraction(t *testing.T) {
	for _, tc := range []struct {
		mem, total int64
		want       string
	}{
		{40960, 143771, "0.2848"},
		{136582, 143771, "0.9499"},
		{143771, 143771, "1.0000"},
		{200000, 143771, "1.0000"},
		{1, 143771, "0.0000"},
		{1024, 0, "0.0000"},
	} {
		if got := MemoryFraction(tc.mem, tc.total); got != tc.want {
			t.Errorf("MemoryFraction(%d, %d) = %s, want %s", tc.mem, tc.total, got, tc.want)
		}
	}
}
