package command

import (
	"errors"

	"github.com/gridcity/gridcity/coordinator/internal/store"
)

// Outcomes of a call refused because the store is unreachable: what did
// not happen, and what to do once it is back.
const (
	NothingApproved  = "nothing was approved: approve it again once the store is back"
	NothingDenied    = "nothing was denied: deny it again once the store is back"
	NothingRequested = "the request was not recorded, so no one was asked and nothing ran: ask again once the store is back"
	NothingRead      = "the request's state cannot be read now: ask again once the store is back"
	NothingRecorded  = "nothing was recorded: try again once the store is back"
)

// StoreDownError is a call refused because the store cannot be reached:
// no approval, denial or command can be recorded, and without the record
// nothing is dispatched. It says what is wrong, what waits and what did
// not happen.
type StoreDownError struct {
	Unavailable *store.UnavailableError
	// Outcome is what did not happen and what to do (see NothingApproved).
	Outcome string
}

func (e *StoreDownError) Error() string {
	return e.Unavailable.Summary() + ": approvals and commands wait until it is back; " + e.Outcome + " (" + e.Unavailable.Err.Error() + ")"
}

func (e *StoreDownError) Unwrap() error { return e.Unavailable }

// StoreDown is err worded as a StoreDownError with outcome when it says
// the store is unreachable (store.ErrUnavailable), else err as it is. The
// outermost call words it: an approval that failed reading the request
// says nothing was approved.
func StoreDown(err error, outcome string) error {
	var u *store.UnavailableError
	if !errors.As(err, &u) {
		return err
	}
	return &StoreDownError{Unavailable: u, Outcome: outcome}
}
