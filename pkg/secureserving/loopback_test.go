package secureserving

import "testing"

func TestLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:8081": true, "[::1]:8081": true, "localhost:8081": true,
		":8081": false, "0.0.0.0:8081": false, "10.0.0.5:8081": false, "[::]:8081": false, "garbage": false,
	} {
		if got := Loopback(addr); got != want {
			t.Errorf("Loopback(%q) = %v, want %v", addr, got, want)
		}
	}
}
