package core

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Benchmarks of core's hot paths; `make bench` runs them with -benchmem and
// folds ns/op, B/op and allocs/op into build/bench/results.json.

// benchPayload1KiB is a typical intent payload of about 1 KiB.
func benchPayload1KiB() []byte {
	text := strings.Repeat("Your table for four is confirmed for Friday at 19:30. ", 13)
	return []byte(fmt.Sprintf(`{"text":%q,"format":"markdown","thread":"th-8812",`+
		`"buttons":[{"id":"ok","label":"OK"},{"id":"cancel","label":"Cancel"}],"locale":"en-GB","priority":2}`, text))
}

// benchPayload64KiB is a large structured payload (a list of line items) of
// about 64 KiB, pretty-printed with unsorted keys so canonicalisation has work.
func benchPayload64KiB() []byte {
	var b strings.Builder
	b.WriteString("{\n  \"title\": \"Order summary\",\n  \"items\": [\n")
	for i := 0; b.Len() < 64<<10-200; i++ {
		if i > 0 {
			b.WriteString(",\n")
		}
		fmt.Fprintf(&b, `    {"sku": "SKU-%06d", "qty": %d, "price": %d.%02d, "name": "Item number %d with a longer description", "tags": ["a", "b", "c"], "ok": true}`,
			i, i%7+1, i%300, i%100, i)
	}
	b.WriteString("\n  ],\n  \"currency\": \"EUR\"\n}")
	return []byte(b.String())
}

func benchHash(b *testing.B, doc []byte) {
	b.ReportAllocs()
	b.SetBytes(int64(len(doc)))
	for b.Loop() {
		if _, err := CanonicalHash(doc); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCanonicalHash1KiB(b *testing.B)  { benchHash(b, benchPayload1KiB()) }
func BenchmarkCanonicalHash64KiB(b *testing.B) { benchHash(b, benchPayload64KiB()) }

func BenchmarkTransition(b *testing.B) {
	pairs := [][2]Status{
		{StatusPending, StatusInFlight}, {StatusInFlight, StatusSucceeded},
		{StatusInFlight, StatusRetryableFailure}, {StatusRetryableFailure, StatusInFlight},
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		p := pairs[i&3]
		if err := Transition(p[0], p[1]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

func BenchmarkBackoffNext(b *testing.B) {
	p := DefaultBackoff(func() float64 { return 0.5 })
	first := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := first.Add(time.Minute)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, ok := p.Next(i%7+1, first, now, 0); !ok {
			b.Fatal("exhausted")
		}
		i++
	}
}

func BenchmarkIntentID(b *testing.B) {
	keys := make([]string, 64)
	for i := range keys {
		keys[i] = "reply-to-msg-" + strconv.Itoa(100000+i)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		_ = IntentID("support-bot", keys[i&63])
		i++
	}
}

// benchStore accepts every intent without copying it: the benchmark measures
// core's own work at intake (validation, decoding, canonicalisation, hashes).
type benchStore struct{ IntentStore }

func (benchStore) Create(_ context.Context, in *Intent) (*Intent, bool, error) { return in, true, nil }

type benchProvider struct{ Provider }

func (benchProvider) SupportsAction(string) bool { return true }

// BenchmarkIntakeBuild1KiB is Intake.Submit of a typical 1 KiB request minus
// the store: everything intake computes before its one conditional put.
func BenchmarkIntakeBuild1KiB(b *testing.B) {
	body := []byte(fmt.Sprintf(`{"kind":"reply","provider":"sandbox","account":"acct-1","action":"send_message","target":"chat-1",`+
		`"payload":%s,"grant":{"id":"g-1","version":1},"metadata":{"conversation":"conv-1234","turn":7}}`, benchPayload1KiB()))
	s := &Intake{
		Store:     benchStore{},
		Providers: ProviderMap{"sandbox": benchProvider{}},
		Clock:     ClockFunc(func() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) }),
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := s.Submit(ctx, "bot-1", "key-1", body); err != nil {
			b.Fatal(err)
		}
	}
}
