package gridcityv1

import (
	"testing"
)

// TestMergeStateEverySection: every message field of StateUpdate set in
// the source replaces the destination's (the same pointer, not a copy),
// and a section the source leaves unset keeps the destination's.
func TestMergeStateEverySection(t *testing.T) {
	fields := (&StateUpdate{}).ProtoReflect().Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if fd.Message() == nil {
			continue
		}
		t.Run(string(fd.Name()), func(t *testing.T) {
			src, dst := &StateUpdate{}, &StateUpdate{}
			sec := src.ProtoReflect().NewField(fd)
			src.ProtoReflect().Set(fd, sec)
			old := dst.ProtoReflect().NewField(fd)
			dst.ProtoReflect().Set(fd, old)
			MergeState(dst, src)
			if got := dst.ProtoReflect().Get(fd).Message().Interface(); got != sec.Message().Interface() {
				t.Errorf("section %s was not replaced by the update's: MergeState must name it", fd.Name())
			}
			// Unset in the source: the destination keeps its own.
			dst2 := &StateUpdate{}
			dst2.ProtoReflect().Set(fd, old)
			MergeState(dst2, &StateUpdate{CollectedUnixMs: 5})
			if got := dst2.ProtoReflect().Get(fd).Message().Interface(); got != old.Message().Interface() || dst2.CollectedUnixMs != 5 {
				t.Errorf("section %s or the collection time was lost by an update without it", fd.Name())
			}
		})
	}
}
