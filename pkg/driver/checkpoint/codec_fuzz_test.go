package checkpoint

import "testing"

// FuzzDecode: no input panics the decoder; whatever it accepts re-encodes to
// something it accepts again with the same content.
func FuzzDecode(f *testing.F) {
	good, err := Encode(sample())
	if err != nil {
		f.Fatal(err)
	}
	empty, _ := Encode(New("b"))
	for _, seed := range [][]byte{good, empty, []byte(`{"version":1,"checksum":"","data":{}}`), []byte(`{}`), nil, []byte(`{"version":1,"data":null}`)} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		cp, err := Decode(raw)
		if err != nil {
			return
		}
		again, err := Encode(cp)
		if err != nil {
			t.Fatalf("Encode: %v", err)
		}
		back, err := Decode(again)
		if err != nil {
			t.Fatalf("re-decoding: %v", err)
		}
		if len(back.Claims) != len(cp.Claims) || back.BootID != cp.BootID {
			t.Fatalf("round trip changed the checkpoint")
		}
	})
}
