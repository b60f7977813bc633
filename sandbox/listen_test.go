package sandbox

import (
	"net"
	"strings"
	"testing"
)

// Issue 24, finding 7: the sandbox listener enforces loopback.
func TestListenRefusesNonLoopbackAddresses(t *testing.T) {
	for _, addr := range []string{":0", "0.0.0.0:0", "[::]:0", "192.0.2.10:0", "example.com:0", "nonsense"} {
		ln, err := Listen(addr)
		if err == nil {
			ln.Close()
			t.Errorf("%s: listening", addr)
			continue
		}
		if !strings.Contains(err.Error(), addr) {
			t.Errorf("%s: error does not name the address: %v", addr, err)
		}
	}
	for _, addr := range []string{"127.0.0.1:0", "localhost:0"} {
		ln, err := Listen(addr)
		if err != nil {
			t.Errorf("%s: %v", addr, err)
			continue
		}
		host, _, _ := net.SplitHostPort(ln.Addr().String())
		if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
			t.Errorf("%s: bound %s", addr, ln.Addr())
		}
		ln.Close()
	}
}
