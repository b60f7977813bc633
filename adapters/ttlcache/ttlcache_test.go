package ttlcache

import (
	"errors"
	"testing"
	"time"
)

func TestCacheExpiresAndNeverCachesFailures(t *testing.T) {
	now := time.Unix(0, 0)
	c := New[string, int](time.Second, 10, func() time.Time { return now })
	loads := 0
	load := func() (int, error) { loads++; return loads, nil }
	if v, _ := c.Get("a", load); v != 1 {
		t.Fatal(v)
	}
	if v, _ := c.Get("a", load); v != 1 || loads != 1 {
		t.Fatalf("cached value not used: %d loads", loads)
	}
	now = now.Add(time.Second)
	if v, _ := c.Get("a", load); v != 2 {
		t.Fatalf("expired value served: %d", v)
	}
	fails := 0
	bad := func() (int, error) { fails++; return 0, errors.New("nope") }
	_, _ = c.Get("b", bad)
	_, _ = c.Get("b", bad)
	if fails != 2 {
		t.Fatalf("a failure was cached")
	}
}

func TestCacheIsBounded(t *testing.T) {
	c := New[int, int](time.Hour, 3, nil)
	for i := 0; i < 100; i++ {
		_, _ = c.Get(i, func() (int, error) { return i, nil })
	}
	if len(c.entries) > 3 {
		t.Fatalf("%d entries", len(c.entries))
	}
}
