package collect

import (
	"math"
	"strconv"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// notFinite returns the first NaN or ±Inf in m, by its field path
// ("cpu.load1 = NaN"), or "". The coordinator refuses a state holding one
// (JSON cannot carry it), so a collector that produced one has its section
// left out with a gap instead: a parser or a division that went wrong costs
// one fact, never the whole state.
func notFinite(m protoreflect.Message) string {
	var bad string
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		bad = notFiniteValue(fd, v)
		if bad != "" {
			bad = fd.JSONName() + bad
		}
		return bad == ""
	})
	return bad
}

func notFiniteValue(fd protoreflect.FieldDescriptor, v protoreflect.Value) string {
	switch {
	case fd.IsList():
		l := v.List()
		for i := range l.Len() {
			if bad := notFiniteOne(fd, l.Get(i)); bad != "" {
				return "[" + strconv.Itoa(i) + "]" + bad
			}
		}
	case fd.IsMap():
		var bad string
		v.Map().Range(func(k protoreflect.MapKey, v protoreflect.Value) bool {
			if b := notFiniteOne(fd.MapValue(), v); b != "" {
				bad = "[" + k.String() + "]" + b
			}
			return bad == ""
		})
		return bad
	default:
		return notFiniteOne(fd, v)
	}
	return ""
}

func notFiniteOne(fd protoreflect.FieldDescriptor, v protoreflect.Value) string {
	switch fd.Kind() {
	case protoreflect.DoubleKind, protoreflect.FloatKind:
		if f := v.Float(); math.IsNaN(f) || math.IsInf(f, 0) {
			return " = " + strconv.FormatFloat(f, 'g', -1, 64)
		}
	case protoreflect.MessageKind, protoreflect.GroupKind:
		if bad := notFinite(v.Message()); bad != "" {
			return "." + bad
		}
	}
	return ""
}
