package fleet

import (
	"errors"
	"hash/maphash"
	"slices"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// What a reload of another replica's servers decodes. Each server is
// read again every few seconds, each time its agent's figures change;
// its other sections change far less often. So a reload decodes only the
// sections whose bytes changed since it last read them (told by a hash),
// and keeps the rest as it made them: the same pointers, which readers
// key what they derive from a section by (topology.reuse), as they can
// for a stream's updates, which replace a section whole when it changes.

// readSections are the hashes of the sections of a server's state and
// hello as a reload last read them; the zero value matches nothing.
type readSections struct {
	hello    uint64
	sections [maxSection + 1]uint64 // by StateUpdate field number
}

// maxSection is StateUpdate's highest field number; a higher one (a
// newer writer) is decoded at every read.
const maxSection = 15

var readSeed = maphash.MakeSeed()

func hashOf(b []byte) uint64 {
	if len(b) == 0 {
		return 0
	}
	return maphash.Bytes(readSeed, b) | 1 // never 0, which matches nothing
}

var errRepeated = errors.New("a section appears twice")

// decodeState decodes raw, a state another replica saved, into a new
// state that shares with prev every section whose bytes are those read
// last time (seen, updated to raw's). shape says whether what the
// topology is built from changed: the host's name or addresses, the
// listeners or the connections.
func decodeState(raw []byte, prev *gridcityv1.StateUpdate, seen *readSections) (next *gridcityv1.StateUpdate, shape bool, err error) {
	next = &gridcityv1.StateUpdate{}
	var now [maxSection + 1]uint64
	pm, nm := prev.ProtoReflect(), next.ProtoReflect()
	fields := nm.Descriptor().Fields()
	for b := raw; len(b) > 0; {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, false, protowire.ParseError(n)
		}
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		if m < 0 {
			return nil, false, protowire.ParseError(m)
		}
		field := b[:n+m]
		b = b[n+m:]
		fd := fields.ByNumber(num)
		if num <= maxSection && fd != nil && fd.Kind() == protoreflect.MessageKind && !fd.IsList() && !fd.IsMap() {
			if now[num] != 0 {
				return nil, false, errRepeated // not as proto.Marshal writes; decoded whole by the caller
			}
			now[num] = hashOf(field)
			if now[num] == seen.sections[num] && pm.Has(fd) {
				nm.Set(fd, pm.Get(fd))
				continue
			}
		}
		if err := (proto.UnmarshalOptions{Merge: true}).Unmarshal(field, next); err != nil {
			return nil, false, err
		}
	}
	for _, name := range []protoreflect.Name{"listeners", "connections"} {
		num := fields.ByName(name).Number()
		shape = shape || now[num] != seen.sections[num]
	}
	shape = shape || prev.GetHost().GetHostname() != next.GetHost().GetHostname() ||
		!slices.Equal(prev.GetHost().GetAddresses(), next.GetHost().GetAddresses())
	seen.sections = now
	return next, shape, nil
}

// decodeHello is decodeState for the hello: prev when its bytes are the
// ones read last time.
func decodeHello(raw []byte, prev *gridcityv1.Hello, seen *readSections) (next *gridcityv1.Hello, changed bool, err error) {
	h := hashOf(raw)
	if h == seen.hello && prev != nil {
		return prev, false, nil
	}
	next = &gridcityv1.Hello{}
	if err := proto.Unmarshal(raw, next); err != nil {
		return nil, false, err
	}
	seen.hello = h
	return next, true, nil
}
