package core

import (
	"errors"
	"strings"
	"testing"
)

func TestCheckID(t *testing.T) {
	for _, c := range []struct {
		v  string
		ok bool
	}{
		{"a", true},
		{"chan-1/with spaces:and#hash", true},
		{"ünïcødé-✓", true},
		{strings.Repeat("a", MaxIDBytes), true},
		{"", false},
		{strings.Repeat("a", MaxIDBytes+1), false},
		{strings.Repeat("a", 3000), false},
		{"ab\x00", false},
		{"a\nb", false},
		{"a\tb", false},
		{"a\x7fb", false},
		{"a\u0085b", false}, // C1 control
		{"a\xffb", false},   // not UTF-8
	} {
		err := CheckID("someId", c.v)
		var ve *ValidationError
		switch {
		case c.ok && err != nil:
			t.Errorf("%q: %v, want accepted", c.v, err)
		case !c.ok && (!errors.As(err, &ve) || ve.Field != "someId" || ve.Code != CodeInvalidField):
			t.Errorf("%q: %v, want a ValidationError naming someId", c.v, err)
		}
	}
}
