package gpu

import "testing"

func TestNormalizeSemver(t *testing.T) {
	tests := map[string]struct {
		raw     string
		want    string
		wantErr bool
	}{
		"leading zero in patch":    {raw: "535.104.05", want: "535.104.5"},
		"leading zero, 560 line":   {raw: "560.28.03", want: "560.28.3"},
		"already strict":           {raw: "550.54.15", want: "550.54.15"},
		"two parts":                {raw: "9.0", want: "9.0.0"},
		"one part":                 {raw: "12", want: "12.0.0"},
		"four parts to build meta": {raw: "570.86.10.1", want: "570.86.10+1"},
		"all zero part":            {raw: "1.00.0", want: "1.0.0"},
		"surrounding space":        {raw: " 550.54.15\n", want: "550.54.15"},
		"empty":                    {raw: "", wantErr: true},
		"letters":                  {raw: "550.54.15-beta", wantErr: true},
		"empty part":               {raw: "550..15", wantErr: true},
		"negative":                 {raw: "-1.0.0", wantErr: true},
		"huge part":                {raw: "1.9999999999.0", wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := NormalizeSemver(tc.raw)
			if (err != nil) != tc.wantErr {
				t.Fatalf("NormalizeSemver(%q) error = %v, wantErr %v", tc.raw, err, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("NormalizeSemver(%q) = %q, want %q", tc.raw, got, tc.want)
			}
		})
	}
}

func TestCUDAVersionString(t *testing.T) {
	tests := map[string]struct {
		in      int
		want    string
		wantErr bool
	}{
		"12.4":     {in: 12040, want: "12.4.0"},
		"12.6":     {in: 12060, want: "12.6.0"},
		"11.8":     {in: 11080, want: "11.8.0"},
		"zero":     {in: 0, wantErr: true},
		"negative": {in: -5, wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := CUDAVersionString(tc.in)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("CUDAVersionString(%d) = %q, %v; want %q, err %v", tc.in, got, err, tc.want, tc.wantErr)
			}
		})
	}
}

func TestModelFromName(t *testing.T) {
	tests := map[string]struct{ name, want string }{
		"H100 SXM":  {"NVIDIA H100 80GB HBM3", "H100"},
		"H200":      {"NVIDIA H200 141GB HBM3e", "H200"},
		"H200 NVL":  {"NVIDIA H200 NVL", "H200"},
		"A100 SXM4": {"NVIDIA A100-SXM4-80GB", "A100"},
		"A100 PCIe": {"NVIDIA A100-PCIE-40GB", "A100"},
		"L4":        {"NVIDIA L4", "L4"},
		"L40S":      {"NVIDIA L40S", "L40S"},
		"B200":      {"NVIDIA B200 180GB HBM3e", "B200"},
		"unknown":   {"NVIDIA Quadro Something", ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := ModelFromName(tc.name); got != tc.want {
				t.Errorf("ModelFromName(%q) = %q, want %q", tc.name, got, tc.want)
			}
		})
	}
}
