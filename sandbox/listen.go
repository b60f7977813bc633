package sandbox

import (
	"fmt"
	"net"
)

// Listen listens on addr for the sandbox. addr must be a loopback address
// ("127.0.0.1:4100", "[::1]:4100", "localhost:4100"): the sandbox has no
// authentication and its control API rewrites provider behaviour, so it
// never listens on another interface. An empty host (":4100") or 0.0.0.0
// is refused with an error naming the address.
func Listen(addr string) (net.Listener, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("sandbox: listen address %q: %w", addr, err)
	}
	if host == "localhost" {
		host = "127.0.0.1"
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("sandbox: refusing to listen on %q: not a loopback address (use 127.0.0.1:<port>; the sandbox is unauthenticated)", addr)
	}
	return net.Listen("tcp", net.JoinHostPort(host, port))
}
