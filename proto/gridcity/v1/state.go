package gridcityv1

import "google.golang.org/protobuf/reflect/protoreflect"

// MergeState applies the update src onto the state dst: each section set
// in src replaces dst's whole (shared, not copied), the rest of dst stays.
// dst.Full is left as it is; collected_unix_ms follows src when src has one.
// The sections are walked by reflection, so a section added to the proto
// merges without touching this function.
func MergeState(dst, src *StateUpdate) {
	if dst == nil || src == nil {
		return
	}
	dr := dst.ProtoReflect()
	src.ProtoReflect().Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if fd.Message() != nil {
			dr.Set(fd, v)
		}
		return true
	})
	if ms := src.GetCollectedUnixMs(); ms != 0 {
		dst.CollectedUnixMs = ms
	}
}
