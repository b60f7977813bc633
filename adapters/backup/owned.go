package backup

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botharness/outbox/adapters/dynamo"
	"github.com/botharness/outbox/core"
)

// What a profile owns, by key shape and bot (docs/decisions.md "Backup and
// restore"): a backup copies exactly these (the profile index, gsi2, lists
// nothing else), so a snapshot holding anything more was not made by Backup.
//
//	INTENT#<id>, INTENT       an intent of the profile's bot: bot = profile, id = core.IntentID(bot, key)
//	INTENT#<id>, HIST#<seq>   a history page of one of those intents, in the profile's index
//	SOURCE#<bot>#<id>, SOURCE a source of the profile's bot, in the profile's index
//
// Index attributes are checked too: a restored intent's are recomputed by
// Store.RestoreIntent, but history pages and sources are written as read,
// so they must carry exactly their own profile index entry and no other.

var histSK = regexp.MustCompile(`^HIST#[0-9]{6}$`)

func str(item map[string]types.AttributeValue, k string) (string, bool) {
	v, ok := item[k].(*types.AttributeValueMemberS)
	if !ok {
		return "", false
	}
	return v.Value, true
}

// CheckOwned refuses (ErrInvalidSnapshot, naming the first offending item)
// a snapshot holding any item that profile does not own. It reads only.
func CheckOwned(profile string, items []map[string]types.AttributeValue) error {
	if err := core.CheckID("profile", profile); err != nil {
		return fmt.Errorf("%w: the manifest's profile is not a bot name", ErrInvalidSnapshot)
	}
	refuse := func(n int, pk, sk, why string) error {
		return fmt.Errorf("%w: item %d (%.60q, %.20q) does not belong to profile %s: %s; a restore writes only the profile's intents, their history and its sources", ErrInvalidSnapshot, n+1, pk, sk, profile, why)
	}
	intents := map[string]bool{}
	// Intents first: history pages are owned through their intent.
	for n, item := range items {
		pk, _ := str(item, "pk")
		sk, _ := str(item, "sk")
		if sk != "INTENT" {
			continue
		}
		if !strings.HasPrefix(pk, "INTENT#") {
			return refuse(n, pk, sk, "not an intent key")
		}
		in, err := dynamo.UnmarshalIntent(item)
		if err != nil {
			return refuse(n, pk, sk, "not an intent")
		}
		switch {
		case in.Bot != profile:
			return refuse(n, pk, sk, "an intent of another bot")
		case dynamo.IntentPK(in.ID) != pk || core.IntentID(in.Bot, in.IdempotencyKey) != in.ID:
			return refuse(n, pk, sk, "its id is not its bot's and key's")
		}
		intents[in.ID] = true
	}
	for n, item := range items {
		pk, okp := str(item, "pk")
		sk, oks := str(item, "sk")
		if !okp || !oks {
			return refuse(n, pk, sk, "no string key")
		}
		if sk == "INTENT" {
			continue
		}
		g2pk, _ := str(item, "gsi2pk")
		_, hasG1 := item["gsi1pk"]
		_, hasG1s := item["gsi1sk"]
		if hasG1 || hasG1s {
			return refuse(n, pk, sk, "it carries a listing index entry")
		}
		switch {
		case strings.HasPrefix(pk, "INTENT#") && histSK.MatchString(sk):
			id := strings.TrimPrefix(pk, "INTENT#")
			if !intents[id] {
				return refuse(n, pk, sk, "a history page of an intent not in the snapshot")
			}
			if iid, _ := str(item, "intentId"); iid != id || g2pk != dynamo.ProfilePK(profile, id, dynamo.ProfileShards) {
				return refuse(n, pk, sk, "a history page outside the profile's index")
			}
		case strings.HasPrefix(pk, "SOURCE#") && sk == "SOURCE":
			bot, _ := str(item, "bot")
			sid, _ := str(item, "sourceId")
			if bot != profile || sid == "" || pk != dynamo.SourcePK(profile, sid) || g2pk != dynamo.ProfilePK(profile, sid, dynamo.ProfileShards) {
				return refuse(n, pk, sk, "a source of another bot")
			}
		default:
			return refuse(n, pk, sk, "not an item a profile owns")
		}
	}
	return nil
}
