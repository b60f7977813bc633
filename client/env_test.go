package client

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"
)

// TestBaseURLFromEnv: OUTBOX_API_URL wins, then http://$OUTBOX_HTTP_ADDR,
// then the default; the source names the variable.
func TestBaseURLFromEnv(t *testing.T) {
	for _, c := range []struct{ api, addr, want, source string }{
		{"", "", DefaultBaseURL, "default"},
		{"", "127.0.0.1:24000", "http://127.0.0.1:24000", EnvHTTPAddr},
		{"http://127.0.0.1:25000/", "127.0.0.1:24000", "http://127.0.0.1:25000", EnvAPIURL},
		{" ", "https://outbox.example.com", "https://outbox.example.com", EnvHTTPAddr},
	} {
		t.Setenv(EnvAPIURL, c.api)
		t.Setenv(EnvHTTPAddr, c.addr)
		if u, s := BaseURLSourceFromEnv(); u != c.want || s != c.source || BaseURLFromEnv() != c.want {
			t.Errorf("OUTBOX_API_URL=%q OUTBOX_HTTP_ADDR=%q: %q from %s, want %q from %s", c.api, c.addr, u, s, c.want, c.source)
		}
	}
}

// TestCheckReachable: a listening address passes; a dead one fails at once
// with ErrUnreachable naming the address and the variables.
func TestCheckReachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := CheckReachable(context.Background(), "http://"+addr, time.Second); err != nil {
		t.Fatalf("listening address: %v", err)
	}
	ln.Close()
	began := time.Now()
	err = CheckReachable(context.Background(), "http://"+addr, 2*time.Second)
	if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), addr) || !strings.Contains(err.Error(), EnvAPIURL) || time.Since(began) > time.Second {
		t.Fatalf("dead address: %v after %s", err, time.Since(began))
	}
	if err := CheckReachable(context.Background(), "127.0.0.1", time.Second); !errors.Is(err, ErrUnreachable) {
		t.Fatalf("not a URL: %v", err)
	}
}
