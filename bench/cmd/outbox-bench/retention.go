package main

import (
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botharness/outbox/adapters/dynamo"
	"github.com/botharness/outbox/adapters/handlers/pruner"
	"github.com/botharness/outbox/adapters/wire"
	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/localstack/system"
)

// retention (issue 27): delivers -retention-n intents under a window
// shortened to -retention-window, measures the table's bytes at rest per
// intent while they are whole, waits until every one is pruned to its
// tombstone (the local TTL reaper plays DynamoDB's TTL service, the pruner
// archives and writes the tombstones from the AWS-shaped stream records) and
// measures again, with the archive's S3 puts per 1,000 pruned intents.
// Bytes are DynamoDB's item-size rules (dynamo.ItemSize) over every item
// under the intents' keys (intent or tombstone, history pages) plus payload
// objects; the bench's payloads are inline (~1 KiB), so no payload object
// exists.
func (r *runner) retention() error {
	n, window := r.f.retentionN, r.f.retentionWindow
	st, api, stop, err := r.startStack(system.Options{
		Config: wire.Config{IntentRetention: window, TombstoneRetention: time.Hour},
		// DynamoDB's TTL deletes in background bursts: the reaper sweeps
		// once a minute, and the pruner gathers for the deployed mapping's
		// window (pruner.MappingBatchingWindow, the stack's too).
		TTLReaperInterval:   time.Minute,
		PruneBatchingWindow: pruner.MappingBatchingWindow, WorkerConcurrency: 8,
	})
	if err != nil {
		return err
	}
	defer stop()
	table := st.App.Store.Table()
	prefix := randName("ret-")
	r.meter.reset()
	start := time.Now()
	ids := make([]string, n)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			c := httpClient(1)
			for i := w; i < n; i += 8 {
				// A loaded machine may time a submission out: resubmit with
				// the same key (a replay is as good as the first answer).
				key := fmt.Sprintf("%s-%d", prefix, i)
				var err error
				for try := 0; try < 5; try++ {
					var status int
					var b []byte
					status, b, _, err = post(r.ctx, c, api, key, intakeBody(account, fmt.Sprintf("chat-%d", i%7)))
					if err == nil && status != http.StatusCreated && status != http.StatusOK {
						err = fmt.Errorf("submit: %d %s", status, b)
					}
					if err == nil {
						break
					}
				}
				if err != nil {
					errs <- err
					return
				}
				ids[i] = core.IntentID(benchBot, key)
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	// Whole: the delivered intents not yet pruned. Delivery and pruning
	// overlap on a slow machine, so every scan is a sample and the one
	// with the most whole ended intents is reported.
	var best sizes
	var after sizes
	deadline := time.Now().Add(window + 5*time.Minute)
	for {
		cur, err := r.tableSizes(table)
		if err != nil {
			return err
		}
		if cur.terminal > best.terminal {
			best = cur
		}
		after = cur
		if cur.tombstones >= n || time.Now().After(deadline) {
			break
		}
		time.Sleep(3 * time.Second) // a scan loads the emulator too
	}
	c := r.meter.snapshot()
	if after.tombstones < n {
		return fmt.Errorf("retention: %d of %d intents pruned after %v", after.tombstones, n, window+5*time.Minute)
	}
	if best.terminal > 0 {
		r.set("bytes_at_rest_per_intent_within_window", round(float64(best.terminalBytes)/float64(best.terminal), 1))
		r.set("retention_whole_sample", best.terminal)
	}
	r.set("retention_seconds", round(time.Since(start).Seconds(), 1))
	r.set("retention_n", n)
	r.set("retention_window_s", window.Seconds())
	r.set("bytes_at_rest_per_intent_after_window", round(float64(after.bytes)/float64(n), 1))
	r.set("tombstone_bytes_max", after.maxTomb)
	// Payloads are inline here (no intake S3 put): every PutObject is an archive batch.
	puts := c.sum([]string{"S3.PutObject"}, "")
	r.set("archive_s3_puts", puts)
	r.set("archive_s3_puts_per_1000_pruned", round(float64(puts)*1000/float64(n), 2))
	fmt.Fprintf(os.Stderr, "bench:   retention n=%d window %v: %.0f B/intent whole, %.0f B/intent after (max tombstone %d B), %d archive puts\n",
		n, window, asFloat(r.res["bytes_at_rest_per_intent_within_window"]), asFloat(r.res["bytes_at_rest_per_intent_after_window"]), after.maxTomb, puts)
	return nil
}

type sizes struct {
	intents, terminal, tombstones int
	bytes, maxTomb, terminalBytes int
}

// tableSizes scans the table (uncounted) and sums the items under intent keys.
func (r *runner) tableSizes(table string) (sizes, error) {
	var s sizes
	var startKey map[string]types.AttributeValue
	for {
		out, err := r.clients.DynamoDB.Scan(uncounted(r.ctx), &dynamodb.ScanInput{TableName: aws.String(table), ExclusiveStartKey: startKey})
		if err != nil {
			return s, err
		}
		for _, it := range out.Items {
			pk, _ := it["pk"].(*types.AttributeValueMemberS)
			if pk == nil || !strings.HasPrefix(pk.Value, "INTENT#") {
				continue
			}
			size := dynamo.ItemSize(it, dynamo.NumberBytesDynamoDB)
			s.bytes += size
			sk, _ := it["sk"].(*types.AttributeValueMemberS)
			if sk == nil || sk.Value != "INTENT" {
				continue
			}
			if dynamo.IsTombstone(it) {
				s.tombstones++
				s.maxTomb = max(s.maxTomb, size)
				continue
			}
			s.intents++
			if st, ok := it["status"].(*types.AttributeValueMemberS); ok && core.Status(st.Value).Terminal() {
				s.terminal++
				s.terminalBytes += size
			}
		}
		if len(out.LastEvaluatedKey) == 0 {
			return s, nil
		}
		startKey = out.LastEvaluatedKey
	}
}
