package core

import "testing"

func TestCanonicalHashIgnoresKeyOrderAndWhitespace(t *testing.T) {
	a, err := CanonicalHash([]byte(`{"b":1,"a":{"y":[1,2,{"k":"v"}],"x":"é"}}`))
	if err != nil {
		t.Fatal(err)
	}
	b, err := CanonicalHash([]byte("{\n  \"a\" : { \"x\":\"\\u00e9\", \"y\":[1, 2, {\"k\" :\"v\"}]},\n \"b\": 1.0 }"))
	if err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Fatalf("equivalent documents hashed differently: %s vs %s", a, b)
	}
	c, _ := CanonicalHash([]byte(`{"b":2,"a":{"y":[1,2,{"k":"v"}],"x":"é"}}`))
	if c == a {
		t.Fatal("different documents hashed the same")
	}
	d, _ := CanonicalHash([]byte(`{"a":{"y":[2,1,{"k":"v"}],"x":"é"},"b":1}`))
	if d == a {
		t.Fatal("array order must matter")
	}
	if _, err := CanonicalHash([]byte(`{"a":`)); err == nil {
		t.Fatal("malformed JSON accepted")
	}
}

func TestIntentIDIsStablePerIdentity(t *testing.T) {
	if IntentID("bot-a", "k1") != IntentID("bot-a", "k1") {
		t.Fatal("same identity, different ids")
	}
	if IntentID("bot-a", "k1") == IntentID("bot-b", "k1") {
		t.Fatal("two bots with one key must be two intents")
	}
	if IntentID("bot-a\x00", "k1") == IntentID("bot-a", "\x00k1") {
		t.Fatal("identity separator is ambiguous")
	}
}
