package backup

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

func TestCodecRoundTripsEveryAttributeType(t *testing.T) {
	item := map[string]types.AttributeValue{
		"s":    &types.AttributeValueMemberS{Value: "héllo"},
		"n":    &types.AttributeValueMemberN{Value: "12.50"},
		"b":    &types.AttributeValueMemberB{Value: []byte{0, 1, 255}},
		"bool": &types.AttributeValueMemberBOOL{Value: true},
		"null": &types.AttributeValueMemberNULL{Value: true},
		"ss":   &types.AttributeValueMemberSS{Value: []string{"a", "b"}},
		"ns":   &types.AttributeValueMemberNS{Value: []string{"1", "2"}},
		"bs":   &types.AttributeValueMemberBS{Value: [][]byte{{1}, {2, 3}}},
		"l":    &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberS{Value: "x"}, &types.AttributeValueMemberN{Value: "3"}}},
		"m": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
			"inner": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"k": &types.AttributeValueMemberBOOL{Value: false}}},
		}},
	}
	enc, err := EncodeItem(item)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(enc)
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	back, err := DecodeItem(raw)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(item, back) {
		t.Fatalf("round trip changed the item:\n%#v\n%#v", item, back)
	}
}

func TestDecodeRejectsGarbage(t *testing.T) {
	for _, s := range []string{`{"a":{"X":"1"}}`, `{"a":{"S":"1","N":"2"}}`, `{"a":"plain"}`, `{"a":{"B":"!!notbase64"}}`} {
		var raw map[string]json.RawMessage
		_ = json.Unmarshal([]byte(s), &raw)
		if _, err := DecodeItem(raw); err == nil {
			t.Errorf("%s decoded without error", s)
		}
	}
}

func TestManifestChecksumCoversEveryField(t *testing.T) {
	m := Manifest{Format: 1, BackupID: "bk_1", Profile: "bot", ItemCount: 2, ItemsSHA256: "abc", InFlightAtCutoff: []string{"it_1"}}
	m.ManifestSHA256 = m.checksum()
	tampered := m
	tampered.InFlightAtCutoff = []string{}
	if tampered.checksum() == m.ManifestSHA256 {
		t.Fatal("dropping the in-flight list did not change the checksum")
	}
	tampered = m
	tampered.ItemCount = 3
	if tampered.checksum() == m.ManifestSHA256 {
		t.Fatal("changing the count did not change the checksum")
	}
}
