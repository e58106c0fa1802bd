package fleetview

import (
	"cmp"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// notEncodable returns the first value in v that encoding/json refuses —
// NaN or ±Inf, by the path of JSON names that leads to it ("cpu.load1") —
// or "" when v encodes. One server's or resource's bad value must cost its
// own row, never the answer for the whole fleet: the agent API refuses such
// values, and this is the answer's own guard against a value that came in
// another way (an older store, a probe of the coordinator's own).
func notEncodable(v any) string {
	path, f, bad := badFloat(reflect.ValueOf(v))
	if !bad {
		return ""
	}
	slices.Reverse(path)
	return strings.TrimPrefix(strings.Join(path, ""), ".") + " = " + strconv.FormatFloat(f, 'g', -1, 64)
}

// badFloat finds the first non-finite float in v. The path to it is built
// on the way out, innermost step first, so that a value without one (every
// answer, nearly always) costs no allocation.
func badFloat(v reflect.Value) (path []string, f float64, bad bool) {
	switch v.Kind() {
	case reflect.Float32, reflect.Float64:
		if f := v.Float(); math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, f, true
		}
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			return badFloat(v.Elem())
		}
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			sf := t.Field(i)
			if !sf.IsExported() {
				continue
			}
			if path, f, bad := badFloat(v.Field(i)); bad {
				name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
				return append(path, "."+cmp.Or(name, sf.Name)), f, true
			}
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			if path, f, bad := badFloat(v.Index(i)); bad {
				return append(path, "["+strconv.Itoa(i)+"]"), f, true
			}
		}
	case reflect.Map:
		for it := v.MapRange(); it.Next(); {
			if path, f, bad := badFloat(it.Value()); bad {
				return append(path, "."+fmt.Sprint(it.Key().Interface())), f, true
			}
		}
	}
	return nil, 0, false
}
