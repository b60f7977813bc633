package core

import (
	"errors"
	"testing"
)

func TestTransitionEveryPair(t *testing.T) {
	type move struct{ from, to Status }
	ok := map[move]bool{
		{StatusPending, StatusInFlight}: true, {StatusPending, StatusExpired}: true,
		{StatusPending, StatusSourceRevised}: true, {StatusPending, StatusGrantRevoked}: true,

		{StatusInFlight, StatusSucceeded}: true, {StatusInFlight, StatusFailed}: true,
		{StatusInFlight, StatusRetryableFailure}: true, {StatusInFlight, StatusUnknownOutcome}: true,
		{StatusInFlight, StatusNeedsHuman}: true, {StatusInFlight, StatusSourceRevised}: true,
		{StatusInFlight, StatusGrantRevoked}: true, {StatusInFlight, StatusExpired}: true,

		{StatusRetryableFailure, StatusInFlight}: true, {StatusRetryableFailure, StatusFailed}: true,
		{StatusRetryableFailure, StatusExpired}: true,

		{StatusUnknownOutcome, StatusSucceeded}: true, {StatusUnknownOutcome, StatusRetryableFailure}: true,
		{StatusUnknownOutcome, StatusNeedsHuman}: true,

		{StatusNeedsHuman, StatusPending}: true, {StatusNeedsHuman, StatusSucceeded}: true,
		{StatusNeedsHuman, StatusAbandoned}: true, {StatusNeedsHuman, StatusUnknownOutcome}: true,
	}
	for _, from := range AllStatuses {
		for _, to := range AllStatuses {
			err := Transition(from, to)
			if ok[move{from, to}] {
				if err != nil {
					t.Errorf("%s -> %s: want allowed, got %v", from, to, err)
				}
				continue
			}
			if !errors.Is(err, ErrForbiddenTransition) {
				t.Errorf("%s -> %s: want ErrForbiddenTransition, got %v", from, to, err)
			}
		}
	}
	if err := Transition("bogus", StatusPending); !errors.Is(err, ErrForbiddenTransition) {
		t.Errorf("unknown status accepted: %v", err)
	}
}

func TestTerminalStatuses(t *testing.T) {
	want := map[Status]bool{
		StatusSucceeded: true, StatusFailed: true, StatusSourceRevised: true,
		StatusGrantRevoked: true, StatusAbandoned: true, StatusExpired: true,
	}
	for _, s := range AllStatuses {
		if s.Terminal() != want[s] {
			t.Errorf("%s.Terminal() = %v", s, s.Terminal())
		}
	}
}
