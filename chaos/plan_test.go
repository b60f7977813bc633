package chaos

import (
	"testing"

	"github.com/botharness/outbox/adapters/dynamo"
	"github.com/botharness/outbox/core"
)

// Large payloads are in the mix: across seeds about a third of the intents
// carry a payload over the inline limit (so it goes through the S3 claim
// check), and drawing them leaves every other draw of a seed unchanged.
func TestPlanMixesLargePayloads(t *testing.T) {
	large, total := 0, 0
	for seed := uint64(1); seed <= 200; seed++ {
		specs, _, _ := Plan(seed, Config{})
		for _, s := range specs {
			total++
			if s.Large > core.PayloadInlineMax {
				large++
			}
		}
	}
	if frac := float64(large) / float64(total); frac < 0.2 || frac > 0.45 {
		t.Fatalf("%d of %d intents carry a large payload (%.2f), want about a third", large, total, frac)
	}
}

// Backups span barrier shards (issue 13): a backup raises all of its
// profile's barrier shards in one transaction while a dispatcher and a
// retrier claim the schedule's intents, and those intents sit on several
// shards, so the suite exercises a raise racing claims on different shards
// (a claim reads only its own shard).
func TestPlanBackupsRaceClaimsOnSeveralBarrierShards(t *testing.T) {
	backups, spanning, maxSpan := 0, 0, 0
	for seed := uint64(1); seed <= 500; seed++ {
		specs, _, names := Plan(seed, Config{})
		has := false
		for _, n := range names {
			has = has || n == "backup/mid-flight"
		}
		if !has {
			continue
		}
		backups++
		shards := map[int]bool{}
		for _, s := range specs {
			shards[dynamo.BarrierShard(core.IntentID(BotOf(seed), s.Key))] = true
		}
		if len(shards) >= 2 {
			spanning++
		}
		maxSpan = max(maxSpan, len(shards))
	}
	if backups < 50 || float64(spanning) < 0.8*float64(backups) || maxSpan < 4 {
		t.Fatalf("%d of 500 plans take a backup, %d of them with intents on >= 2 barrier shards (widest %d): want >= 50, >= 80%%, >= 4",
			backups, spanning, maxSpan)
	}
	t.Logf("%d of 500 plans take a backup; %d span >= 2 barrier shards; widest %d", backups, spanning, maxSpan)
}

// Pruning is in the mix (issue 27): many plans prune, many of those replay
// a pruned key, and the retention steps are drawn apart, so every other
// step of a seed's plan is the one it had without them.
func TestPlanPrunesAndReplaysPrunedKeysLeavingTheRestUnchanged(t *testing.T) {
	prunes, replays := 0, 0
	for seed := uint64(1); seed <= 300; seed++ {
		cfg := Config{}
		cfg.defaults()
		_, _, base := basePlan(seed, cfg)
		_, _, names := Plan(seed, Config{})
		var rest []string
		p, r := false, false
		for _, n := range names {
			switch n {
			case "retention/prune":
				p = true
			case "retention/replay-pruned":
				r = true
			default:
				rest = append(rest, n)
			}
		}
		if len(rest) != len(base) {
			t.Fatalf("seed %d: %d other steps with retention, %d without", seed, len(rest), len(base))
		}
		for i := range rest {
			if rest[i] != base[i] {
				t.Fatalf("seed %d: step %d is %s with retention, %s without", seed, i, rest[i], base[i])
			}
		}
		if p {
			prunes++
		}
		if r {
			replays++
		}
	}
	if prunes < 150 || replays < 100 {
		t.Fatalf("%d of 300 plans prune, %d replay a pruned key: want >= 150 and >= 100", prunes, replays)
	}
	t.Logf("%d of 300 plans prune, %d replay a pruned key", prunes, replays)
}

// The capability shapes of the real providers are in the mix: short key
// windows (Discord's nonce: seconds of fake time against a day), and
// client-chosen ids with lookup (Google Calendar's event id), never together
// with keys; drawing them leaves every other draw of a seed unchanged.
func TestPlanMixesProviderCapabilityShapes(t *testing.T) {
	chosen, short, lookupOnly := 0, 0, 0
	for seed := uint64(1); seed <= 200; seed++ {
		specs, _, _ := Plan(seed, Config{})
		for _, s := range specs {
			if s.ChosenID {
				chosen++
				if s.Keys || !s.Lookup {
					t.Fatalf("seed %d intent %d: a chosen id with %s", seed, s.N, s.caps())
				}
			}
			if s.Lookup && !s.Keys {
				lookupOnly++
			}
			if s.Keys && s.Retain <= 10 {
				short++
			}
		}
	}
	if chosen == 0 || short == 0 || chosen < lookupOnly/4 || chosen > lookupOnly*3/4 {
		t.Fatalf("chosen ids %d of %d lookup-only accounts, short key windows %d", chosen, lookupOnly, short)
	}
}
