package command

import (
	"crypto/ecdh"
	"crypto/hpke"
	"encoding/json"
	"fmt"
	"time"
)

// HandoffKey is the key pair a replica makes at its start for the approved
// commands other replicas hand it: the public half is registered with its
// replica row, the private half lives only in its memory and dies with it,
// so that a command approved for a replica that died can never be sent by
// another with the approver's secrets. HPKE (RFC 9180): DHKEM(X25519),
// HKDF-SHA256, AES-256-GCM.
type HandoffKey struct {
	priv hpke.PrivateKey
}

var (
	handoffKEM  = hpke.DHKEM(ecdh.X25519())
	handoffKDF  = hpke.HKDFSHA256()
	handoffAEAD = hpke.AES256GCM()
)

// NewHandoffKey makes a replica's hand-off key pair.
func NewHandoffKey() (*HandoffKey, error) {
	k, err := handoffKEM.GenerateKey()
	if err != nil {
		return nil, fmt.Errorf("make the hand-off key: %w", err)
	}
	return &HandoffKey{priv: k}, nil
}

// Public is the public half, to register with the replica; nil for no key.
func (k *HandoffKey) Public() []byte {
	if k == nil {
		return nil
	}
	return k.priv.PublicKey().Bytes()
}

// handoffInfo binds a sealed approval to its request: opened as another
// request's, it fails.
func handoffInfo(id string) []byte { return []byte("gridcity hand-off v1\x00" + id) }

// sealed is what a hand-off carries: the two values an approval gives that
// are never stored in the clear.
type sealed struct {
	Input        []byte `json:"input,omitempty"`
	SudoPassword []byte `json:"sudoPassword,omitempty"`
}

// sealApproval seals a's input and sudo password for the replica whose
// public hand-off key is pub, bound to request id.
func sealApproval(pub []byte, id string, a Approval) ([]byte, error) {
	pk, err := handoffKEM.NewPublicKey(pub)
	if err != nil {
		return nil, fmt.Errorf("its hand-off key is unreadable: %w", err)
	}
	pt, err := json.Marshal(sealed{Input: a.Input, SudoPassword: a.SudoPassword})
	if err != nil {
		return nil, err
	}
	defer clear(pt)
	return hpke.Seal(pk, handoffKDF, handoffAEAD, handoffInfo(id), pt)
}

// open opens a hand-off sealed to this key for request id.
func (k *HandoffKey) open(id string, blob []byte) (Approval, error) {
	pt, err := hpke.Open(k.priv, handoffKDF, handoffAEAD, handoffInfo(id), blob)
	if err != nil {
		return Approval{}, fmt.Errorf("it was not sealed to this coordinator's key for this request: %w", err)
	}
	defer clear(pt)
	var v sealed
	if err := json.Unmarshal(pt, &v); err != nil {
		return Approval{}, err
	}
	return Approval{Input: v.Input, SudoPassword: v.SudoPassword}, nil
}

// Shared makes a Service one of several replicas on one store (see Share).
type Shared struct {
	// Replica is this replica's id, as in the replicas table.
	Replica string
	// Key is its hand-off key, whose public half it registered.
	Key *HandoffKey
	// LiveFor is how long a replica counts live after its last heartbeat.
	LiveFor time.Duration
}

// Timing of hand-offs between replicas.
const (
	// handoffGrace is how long an approved request without a hand-off
	// may wait for the replica that approved it to dispatch it before a
	// sweep (on any replica) ends it: that replica commits the dispatch
	// within milliseconds unless it died in between.
	handoffGrace = 15 * time.Second
	// handoffLimit is how long a hand-off to a live replica may wait to
	// be taken before a sweep ends it.
	handoffLimit = time.Minute
)

// rank orders the statuses a request passes through: a change never goes
// back, so a state read from the store that ranks below one already
// published is stale and not published again.
func (s Status) rank() int {
	switch {
	case s == StatusPending:
		return 0
	case s == StatusApproved:
		return 1
	case s == StatusDispatched:
		return 2
	case s == StatusRunning:
		return 3
	case s.Terminal():
		return 4
	}
	return -1
}

// kind is the event a change to status s is published as.
func (s Status) kind() EventKind {
	switch s {
	case StatusPending:
		return EventCreated
	case StatusApproved:
		return EventDecided
	case StatusDispatched, StatusRunning:
		return EventUpdated
	}
	return EventFinished
}
