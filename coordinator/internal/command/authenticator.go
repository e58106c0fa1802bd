package command

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/gridcity/gridcity/coordinator/internal/sealing"
	"github.com/gridcity/gridcity/coordinator/internal/store"
)

// approvalPurpose is what approvals and hand-offs are authenticated for
// with the unseal key (its MAC subkey).
const approvalPurpose = "approval"

// approvalMessage is the canonical encoding an approval's authenticator
// is made over: every field that decides what runs, where, as whom and on
// whose word (never the secret typed on the card), each length-prefixed so
// that no two requests encode alike; with h, a hand-off's, which adds the
// replica it is for and the sealed secrets it carries. Versioned: a change
// of fields is a new version, and what an older one authenticated no
// longer verifies.
func approvalMessage(r Request, h *store.Handoff) []byte {
	var b []byte
	field := func(s string) {
		b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
		b = append(b, s...)
	}
	field("gridcity approval v1")
	if h == nil {
		field("approval")
	} else {
		field("hand-off")
	}
	field(r.ID)
	field(r.Server)
	field(r.Command)
	field(r.RunAs)
	field(strconv.Itoa(r.TimeoutSeconds))
	if r.Input == nil {
		field("no input")
	} else {
		field("input")
		field(r.Input.Prompt)
		field(strconv.FormatBool(r.Input.Secret))
	}
	field(r.DecidedBy)
	field(strconv.FormatInt(r.DecidedAt.UnixNano(), 10))
	if h != nil {
		field(h.Replica)
		field(string(h.Sealed))
	}
	return b
}

// authenticator is the authenticator of the approval in r, or with h of
// its hand-off h, made with the unseal key (nil without one).
func (s *Service) authenticator(r Request, h *store.Handoff) []byte {
	return s.cfg.Unseal.MAC(approvalPurpose, approvalMessage(r, h))
}

// errUnauthenticated is an approval or a hand-off read from the store
// whose authenticator does not verify: this coordinator (or another
// given the same unseal key) did not make it.
var errUnauthenticated = errors.New("the approval's authenticator did not verify: it was not made by a coordinator holding the unseal key, or the request was changed in the store since")

// authentic checks the approval in r and its hand-off h as read from the
// store, against the request as stored.
func (s *Service) authentic(r Request, h store.Handoff) error {
	if h.RequestID != r.ID ||
		!s.cfg.Unseal.Verify(approvalPurpose, approvalMessage(r, nil), r.Authenticator) ||
		!s.cfg.Unseal.Verify(approvalPurpose, approvalMessage(r, &h), h.Auth) {
		return errUnauthenticated
	}
	return nil
}

// ErrNoAuthenticator is an approval stored without an authenticator: one
// decided before approvals carried them.
var ErrNoAuthenticator = errors.New("the approval has no authenticator")

// VerifyApproval checks, offline, the authenticator of the approval in
// body (a request as the store keeps it) with the unseal key: what
// `gridcity audit verify` does for every approved step.
func VerifyApproval(key *sealing.Key, body []byte) error {
	var r Request
	if err := json.Unmarshal(body, &r); err != nil {
		return fmt.Errorf("read the stored request: %w", err)
	}
	if len(r.Authenticator) == 0 {
		return ErrNoAuthenticator
	}
	if !key.Verify(approvalPurpose, approvalMessage(r, nil), r.Authenticator) {
		return errUnauthenticated
	}
	return nil
}

// takenHandoffs remembers the hand-offs this replica took, by the hash of
// their sealed bytes (fresh for every hand-off: HPKE seals with a new key
// each time), so that one copied from the store and written back after it
// ran is refused. A hand-off can only be opened with the key this replica
// made at its start, so memory is enough; entries go once their approval
// is too old to be taken at all (handoffLimit), with a margin.
type takenHandoffs map[[sha256.Size]byte]time.Time

func (t takenHandoffs) seen(h store.Handoff) bool {
	_, ok := t[sha256.Sum256(h.Sealed)]
	return ok
}

func (t takenHandoffs) add(h store.Handoff, decidedAt time.Time) {
	t[sha256.Sum256(h.Sealed)] = decidedAt
}

// forget drops the entries of approvals decided before cutoff.
func (t takenHandoffs) forget(cutoff time.Time) {
	for k, at := range t {
		if at.Before(cutoff) {
			delete(t, k)
		}
	}
}
