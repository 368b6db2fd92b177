package secureserving

import "net"

// Loopback reports whether addr (host:port) listens on a loopback address
// only: an unauthenticated /metrics there is reachable from the pod (or
// host) alone.
func Loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return host == "localhost" || (ip != nil && ip.IsLoopback())
}
