package collect

import (
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
)

// The sections are walked by reflection so that a section added to the
// proto is diffed and merged without touching this file.
var (
	stateFields = (&gridcityv1.StateUpdate{}).ProtoReflect().Descriptor().Fields()
	hostField   = stateFields.ByName("host")
	gapsField   = stateFields.ByName("gaps")
)

// Changes returns an update holding the sections of next that differ from
// prev (proto.Equal per section), nil when none does. A section unset in
// next is not a change: it was not collected this time. HostInfo ignores
// uptime_seconds, which changes every second and follows from boot_unix.
// When anything changed, the result carries next's whole gap list too,
// since a set Gaps always means the whole list. The result shares its
// sections with next.
func Changes(prev, next *gridcityv1.StateUpdate) *gridcityv1.StateUpdate {
	if next == nil {
		return nil
	}
	if prev == nil {
		prev = &gridcityv1.StateUpdate{}
	}
	pr, nr := prev.ProtoReflect(), next.ProtoReflect()
	out := &gridcityv1.StateUpdate{CollectedUnixMs: next.GetCollectedUnixMs()}
	or := out.ProtoReflect()
	changed := false
	nr.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if fd.Message() == nil {
			return true
		}
		if pr.Has(fd) && sectionEqual(fd, pr.Get(fd).Message().Interface(), v.Message().Interface()) {
			return true
		}
		or.Set(fd, v)
		changed = true
		return true
	})
	if !changed {
		return nil
	}
	if nr.Has(gapsField) {
		or.Set(gapsField, nr.Get(gapsField))
	}
	return out
}

// sectionEqual compares one section of two updates.
func sectionEqual(fd protoreflect.FieldDescriptor, a, b proto.Message) bool {
	if fd != hostField {
		return proto.Equal(a, b)
	}
	ha, hb := a.(*gridcityv1.HostInfo), b.(*gridcityv1.HostInfo)
	if ha.GetUptimeSeconds() == hb.GetUptimeSeconds() {
		return proto.Equal(ha, hb)
	}
	// Compare a copy with the uptime aligned; the inputs stay untouched.
	hc := proto.CloneOf(hb)
	hc.UptimeSeconds = ha.GetUptimeSeconds()
	return proto.Equal(ha, hc)
}

// Merge applies the update src onto the state dst; see
// gridcityv1.MergeState, which the coordinator uses too.
func Merge(dst, src *gridcityv1.StateUpdate) { gridcityv1.MergeState(dst, src) }
