package gate

import (
	"encoding/json"
	"errors"
	"testing"
	"time"
)

var t0 = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

func at(d time.Duration) *time.Time { t := t0.Add(d); return &t }

func TestAdmit(t *testing.T) {
	hold := 2 * time.Second
	open := func(until, probe *time.Time) GateState {
		return GateState{Breaker: Breaker{Open: true, Failures: 3, Opens: 1, OpenUntil: until, ProbeUntil: probe}}
	}
	cases := []struct {
		name     string
		slot     time.Duration // relative to now
		tol      time.Duration
		st       GateState
		want     VerdictKind
		wantAt   time.Duration
		keepSlot bool
	}{
		{"free slot now", 0, 0, GateState{}, VerdictSend, 0, false},
		{"slot in the past (within tolerance) sends now", -time.Second, 2 * time.Second, GateState{}, VerdictSend, 0, false},
		{"slot soon: hold in-process", 500 * time.Millisecond, 0, GateState{}, VerdictSend, 500 * time.Millisecond, false},
		{"slot exactly maxHold away: hold", 2 * time.Second, 0, GateState{}, VerdictSend, 2 * time.Second, false},
		{"slot beyond maxHold: defer keeping the slot", 5 * time.Second, 0, GateState{}, VerdictDefer, 5 * time.Second, true},
		{"burst tolerance pulls the send earlier", 5 * time.Second, 4 * time.Second, GateState{}, VerdictSend, time.Second, false},
		{"paused: defer to the pause end, fresh slot", 0, 0, GateState{PausedUntil: at(5 * time.Second)}, VerdictDefer, 5 * time.Second, false},
		{"pause over", 0, 0, GateState{PausedUntil: at(-time.Second)}, VerdictSend, 0, false},
		{"pause outranks the slot", 3 * time.Second, 0, GateState{PausedUntil: at(9 * time.Second)}, VerdictDefer, 9 * time.Second, false},
		{"slot after the pause: the slot decides", 9 * time.Second, 0, GateState{PausedUntil: at(5 * time.Second)}, VerdictDefer, 9 * time.Second, true},
		{"breaker open: defer to cooldown end", 0, 0, open(at(8*time.Second), nil), VerdictDefer, 8 * time.Second, false},
		{"breaker half-open: safe intent probes", 0, 0, open(at(-time.Second), nil), VerdictProbe, 0, false},
		{"breaker half-open: a probe is out", 0, 0, open(at(-time.Second), at(3*time.Second)), VerdictDefer, 3 * time.Second, false},
		{"breaker half-open: expired probe lease lets another probe", 0, 0, open(at(-3*time.Second), at(-time.Second)), VerdictProbe, 0, false},
		{"closed breaker with failures sends", 0, 0, GateState{Breaker: Breaker{Failures: 2}}, VerdictSend, 0, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := Admit(t0.Add(c.slot), c.tol, c.st, t0, hold)
			if v.Kind != c.want || !v.At.Equal(t0.Add(c.wantAt)) || v.KeepSlot != c.keepSlot {
				t.Fatalf("Admit = %+v, want kind %d at +%v keepSlot %v", v, c.want, c.wantAt, c.keepSlot)
			}
		})
	}
}

func TestCooldownAfterGrowsAndCaps(t *testing.T) {
	b := BreakerPolicy{Cooldown: 10 * time.Second, MaxCooldown: time.Minute}
	for _, c := range []struct {
		opens int
		want  time.Duration
	}{{1, 10 * time.Second}, {2, 20 * time.Second}, {3, 40 * time.Second}, {4, time.Minute}, {10, time.Minute}} {
		if got := b.CooldownAfter(c.opens); got != c.want {
			t.Fatalf("CooldownAfter(%d) = %v, want %v", c.opens, got, c.want)
		}
	}
}

func TestReservationUsableAndSendTooLate(t *testing.T) {
	p := Pace{Rate: 20, Per: time.Second, Burst: 3} // interval 50ms, tolerance 100ms
	for _, c := range []struct {
		resv time.Duration
		want bool
	}{{time.Second, true}, {0, true}, {-50 * time.Millisecond, true}, {-51 * time.Millisecond, false}} {
		if got := ReservationUsable(t0.Add(c.resv), p, t0); got != c.want {
			t.Fatalf("ReservationUsable(%v) = %v", c.resv, got)
		}
	}
	for _, c := range []struct {
		slot time.Duration
		want bool
	}{{time.Second, false}, {0, false}, {-25 * time.Millisecond, false}, {-26 * time.Millisecond, true}, {-time.Hour, true}} {
		if got := SendTooLate(t0.Add(c.slot), p, t0); got != c.want {
			t.Fatalf("SendTooLate(%v) = %v", c.slot, got)
		}
	}
}

func TestPaceJSONAndValidate(t *testing.T) {
	var p Pace
	if err := json.Unmarshal([]byte(`{"rate":20,"per":"1s"}`), &p); err != nil {
		t.Fatal(err)
	}
	if p != (Pace{Rate: 20, Per: time.Second, Burst: 1}) || p.Interval() != 50*time.Millisecond || p.Tolerance() != 0 {
		t.Fatalf("pace %+v", p)
	}
	b, _ := json.Marshal(Pace{Rate: 1, Per: time.Minute, Burst: 1})
	if string(b) != `{"rate":1,"per":"1m0s","burst":1}` {
		t.Fatalf("marshal %s", b)
	}
	if err := json.Unmarshal([]byte(`{"rate":20,"per":"soon"}`), &p); err == nil {
		t.Fatal("bad per accepted")
	}
	for _, bad := range []Pace{{Rate: 0, Per: time.Second, Burst: 1}, {Rate: 5, Per: 0, Burst: 1}, {Rate: 5, Per: time.Second, Burst: 6}, {Rate: 100000, Per: time.Millisecond, Burst: 1}} {
		var ve *InvalidPace
		if err := bad.Validate(); !errors.As(err, &ve) || ve.Field == "" {
			t.Fatalf("%+v: %v", bad, err)
		}
	}
}

func TestCleanGate(t *testing.T) {
	o := &PaceOverride{Pace: Pace{Rate: 1, Per: time.Second, Burst: 1}}
	for _, c := range []struct {
		name string
		st   GateState
		want bool
	}{
		{"new account", GateState{}, true},
		{"closed after an outage", GateState{Breaker: Breaker{ClosedAt: at(-time.Minute)}}, true},
		{"a failure streak below the threshold: Admit never reads the count", GateState{Breaker: Breaker{Failures: 1}}, true},
		{"open", GateState{Breaker: Breaker{Open: true, OpenUntil: at(time.Second)}}, false},
		{"open, cooldown over", GateState{Breaker: Breaker{Open: true, OpenUntil: at(-time.Second)}}, false},
		{"probe out", GateState{Breaker: Breaker{Open: true, ProbeUntil: at(time.Second)}}, false},
		{"paused", GateState{PausedUntil: at(time.Second)}, false},
		{"pause just ended (within the settle)", GateState{PausedUntil: at(-GateCleanSettle / 2)}, false},
		{"pause ended", GateState{PausedUntil: at(-GateCleanSettle)}, true},
		{"operator's pace", GateState{Override: o}, false},
	} {
		if got := CleanGate(c.st, t0); got != c.want {
			t.Errorf("%s: CleanGate = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestEndsStreak(t *testing.T) {
	for _, c := range []struct {
		name    string
		probe   bool
		read    GateState
		counted bool
		want    bool
	}{
		{"the common case: nothing to end", false, GateState{}, false, false},
		{"a probe's success closes the breaker", true, GateState{}, false, true},
		{"read an open breaker", false, GateState{Breaker: Breaker{Open: true}}, false, true},
		{"read a streak", false, GateState{Breaker: Breaker{Failures: 3}}, false, true},
		{"a replica read shows no streak, but this process counted one", false, GateState{}, true, true},
	} {
		if got := EndsStreak(c.probe, c.read, c.counted); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
