package dynamo

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botharness/outbox/core"
)

// ListPage lists the intents waiting for a human, oldest first across every
// shard, with an opaque cursor for the next page ("" when there is none).
// Only needs-human has a listing: the other open states share the repair
// index, which is ordered by when the sweeper looks, not by status.
func (s *Store) ListPage(ctx context.Context, status core.Status, cursor string, limit int) ([]*core.Intent, string, error) {
	switch status {
	case core.StatusNeedsHuman:
		return s.listShards(ctx, "needs-human", humanPfx, status, cursor, limit, 1)
	case core.StatusPending, core.StatusInFlight, core.StatusRetryableFailure, core.StatusUnknownOutcome:
		// No index of their own: every such intent is in the repair index
		// (DUE#, ordered by its next repair check) beside the others not
		// waiting for a human. A page reads up to listScanPages pages of it
		// and keeps the intents in the status asked for; a short page with a
		// cursor means "more may follow". The cost is proportional to the
		// non-final backlog, which the sweeper reads anyway.
		return s.listShards(ctx, string(status), duePfx, status, cursor, limit, listScanPages)
	}
	return nil, "", &core.ValidationError{Code: core.CodeInvalidField, Field: "status",
		Message: "status must be one of needs-human, unknown-outcome, retryable-failure, pending, in-flight (final intents are not listed; read one by id)"}
}

// listScanPages bounds the repair-index pages one listing of a status other
// than needs-human reads (TestListsEveryNonFinalStatus).
const listScanPages = 10

func (s *Store) listShards(ctx context.Context, listing, pfx string, status core.Status, cursor string, limit, pages int) ([]*core.Intent, string, error) {
	limit = min(max(limit, 1), 100)
	out := make([]*core.Intent, 0, limit)
	next := cursor
	for range pages {
		entries, n, err := mergedPage(ctx, s.db, s.table, mergedShape{listing: listing, shards: s.RepairShards(), pkPrefix: "INTENT#", sk: intentSK}, pfx, next, limit-len(out))
		if err != nil {
			return nil, "", err
		}
		items, err := hydrate(ctx, s.db, s.table, entries)
		if err != nil {
			return nil, "", err
		}
		for _, item := range items {
			in, err := UnmarshalIntent(item)
			if err != nil {
				return nil, "", err
			}
			if in.Status == status { // the index may lag a decision
				out = append(out, in)
			}
		}
		next = n
		if next == "" || len(out) >= limit {
			break
		}
	}
	return out, next, nil
}

// mergedCursor is the position of a listing spread over shards: for each
// shard, the index key of the last entry shown ("" = from the start), and
// which shards are exhausted.
type mergedCursor struct {
	Listing string               `json:"l"`
	Pos     map[string]repairPos `json:"p,omitempty"`
	Done    []int                `json:"d,omitempty"`
}

// mergedPage reads one page of a gsi1 listing sharded over <pfx><0..n-1>,
// ordered by gsi1sk across all shards: every shard is queried from its
// position (in parallel), the results are merged, and the first limit kept.
// The cursor keeps a position per shard, so a page never repeats or skips
// an entry, whatever is written meanwhile.
func mergedPage(ctx context.Context, db API, table string, shape mergedShape, pfx string, cursor string, limit int) ([]map[string]types.AttributeValue, string, error) {
	limit = min(max(limit, 1), 100)
	listing, n := shape.listing, shape.shards
	cur, err := decodeMergedCursor(cursor, shape)
	if err != nil {
		return nil, "", err
	}
	done := map[int]bool{}
	for _, d := range cur.Done {
		done[d] = true
	}
	type shardPage struct {
		shard int
		items []map[string]types.AttributeValue
		more  bool
	}
	var (
		mu    sync.Mutex
		pages []shardPage
		errs  []error
		wg    sync.WaitGroup
		sem   = make(chan struct{}, 16)
	)
	for shard := 0; shard < n; shard++ {
		if done[shard] {
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func(shard int) {
			defer wg.Done()
			defer func() { <-sem }()
			pk := shardKey(pfx, shard)
			var start map[string]types.AttributeValue
			if p, ok := cur.Pos[strconv.Itoa(shard)]; ok {
				start = map[string]types.AttributeValue{"gsi1pk": avS(pk),
					"gsi1sk": avS(p.SK), "pk": avS(p.PK),
					"sk": avS(p.SKey)}
			}
			res, err := db.Query(ctx, listingQuery(table, gsiName, pk, start, limit))
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("list %s shard %d: %w", listing, shard, err))
				return
			}
			pages = append(pages, shardPage{shard: shard, items: res.Items, more: len(res.LastEvaluatedKey) > 0})
		}(shard)
	}
	wg.Wait()
	if len(errs) > 0 {
		return nil, "", errs[0]
	}
	type entry struct {
		shard int
		item  map[string]types.AttributeValue
	}
	var all []entry
	for _, p := range pages {
		for _, it := range p.items {
			all = append(all, entry{p.shard, it})
		}
	}
	sort.Slice(all, func(i, j int) bool {
		a, b := attrS(all[i].item, "gsi1sk"), attrS(all[j].item, "gsi1sk")
		if a != b {
			return a < b
		}
		return attrS(all[i].item, "pk") < attrS(all[j].item, "pk")
	})
	taken := all
	if len(taken) > limit {
		taken = all[:limit]
	}
	out := make([]map[string]types.AttributeValue, 0, len(taken))
	shown := map[int]int{}
	for _, e := range taken {
		cur.Pos[strconv.Itoa(e.shard)] = repairPos{SK: attrS(e.item, "gsi1sk"), PK: attrS(e.item, "pk"), SKey: attrS(e.item, "sk")}
		shown[e.shard]++
		out = append(out, e.item)
	}
	// A shard is exhausted once everything it returned was shown and it
	// had nothing more.
	for _, p := range pages {
		if !p.more && shown[p.shard] == len(p.items) {
			cur.Done = append(cur.Done, p.shard)
		}
	}
	if len(cur.Done) >= n {
		return out, "", nil
	}
	sort.Ints(cur.Done)
	b, _ := json.Marshal(cur)
	return out, base64.RawURLEncoding.EncodeToString(b), nil
}
