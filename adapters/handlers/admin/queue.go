package admin

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/botharness/outbox/adapters/handlers/httpjson"
	"github.com/botharness/outbox/core"
	"github.com/botharness/outbox/core/overview"
)

// maxScanPages bounds the underlying pages one filtered list request reads;
// a sparse filter then returns fewer rows and a cursor to continue.
const maxScanPages = 10

// queueFilter reads the list's filters: provider, account, bot, and
// minAgeSeconds (waited at least that long).
func queueFilter(req events.APIGatewayV2HTTPRequest) (overview.IntentFilter, events.APIGatewayV2HTTPResponse, bool) {
	q := req.QueryStringParameters
	f := overview.IntentFilter{Provider: q["provider"], Account: q["account"], Bot: q["bot"]}
	for name, v := range map[string]string{"provider": f.Provider, "account": f.Account, "bot": f.Bot} {
		if len(v) > 255 {
			return f, httpjson.Error(http.StatusBadRequest, core.CodeInvalidField, name+" is at most 255 characters", name), false
		}
	}
	if v := q["minAgeSeconds"]; v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 || n > 366*24*3600 {
			return f, httpjson.Error(http.StatusBadRequest, core.CodeInvalidField, "minAgeSeconds must be a whole number of seconds, 0 to one year", "minAgeSeconds"), false
		}
		f.MinWaiting = time.Duration(n) * time.Second
	}
	return f, events.APIGatewayV2HTTPResponse{}, true
}

// listMatching returns up to limit intents that match f, continuing the
// store's own cursor: the returned cursor always points just past the last
// intent read, so no match is skipped between pages. When a page holds more
// matches than still fit, that page is read again with a smaller limit that
// ends at the last match returned.
func listMatching(ctx context.Context, l Lister, status core.Status, cursor string, limit int, f overview.IntentFilter, now time.Time) ([]*core.Intent, string, error) {
	if f == (overview.IntentFilter{}) {
		return l.ListPage(ctx, status, cursor, limit)
	}
	var out []*core.Intent
	for page := 0; page < maxScanPages; page++ {
		items, next, err := l.ListPage(ctx, status, cursor, limit)
		if err != nil {
			return nil, "", err
		}
		need := limit - len(out)
		var matched []*core.Intent
		cut := -1
		for i, in := range items {
			if f.Matches(in, now) {
				matched = append(matched, in)
				if len(matched) == need {
					cut = i
					break
				}
			}
		}
		if cut >= 0 && cut < len(items)-1 {
			// Re-read the page up to the last match, for an exact cursor.
			items, next, err = l.ListPage(ctx, status, cursor, cut+1)
			if err != nil {
				return nil, "", err
			}
			matched = matched[:0]
			for _, in := range items {
				if f.Matches(in, now) {
					matched = append(matched, in)
				}
			}
		}
		out = append(out, matched...)
		cursor = next
		if next == "" || len(out) >= limit {
			break
		}
	}
	return out, cursor, nil
}
