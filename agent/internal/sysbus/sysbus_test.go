package sysbus

import (
	"encoding/binary"
	"reflect"
	"testing"
)

// A ListUnits reply entry, as systemd sends it, decodes to its fields.
func TestDecodeBody(t *testing.T) {
	var e encoder
	e.u32(0) // the array's length, set below
	at := len(e.b)
	e.align(8)
	start := len(e.b)
	for _, s := range []string{"web.service", "The web server", "loaded", "failed", "failed", ""} {
		e.str(s)
	}
	e.str("/org/freedesktop/systemd1/unit/web_2eservice")
	e.u32(7)
	e.str("")
	e.str("/")
	binary.LittleEndian.PutUint32(e.b[at-4:], uint32(len(e.b)-start))
	got, err := decodeBody(binary.LittleEndian, e.b, "a(ssssssouso)")
	if err != nil {
		t.Fatal(err)
	}
	want := []any{[]any{[]any{"web.service", "The web server", "loaded", "failed", "failed", "", ObjectPath("/org/freedesktop/systemd1/unit/web_2eservice"), uint32(7), "", ObjectPath("/")}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %#v; want %#v", got, want)
	}
	// A variant of t, as Properties.Get returns a timestamp.
	v := []byte{1, 't', 0, 0, 0, 0, 0, 0, 0x40, 0x42, 0x0f, 0, 0, 0, 0, 0}
	got, err = decodeBody(binary.LittleEndian, v, "v")
	if err != nil || !reflect.DeepEqual(got, []any{Variant{Signature: "t", Value: uint64(1_000_000)}}) {
		t.Errorf("variant: got %#v, %v; want 1000000 as t", got, err)
	}
	if _, err := decodeBody(binary.LittleEndian, e.b[:len(e.b)-3], "a(ssssssouso)"); err == nil {
		t.Error("a cut message decoded; want an error")
	}
}

func TestSocketPath(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"unix:path=/run/dbus/system_bus_socket", "/run/dbus/system_bus_socket"},
		{"unix:path=/tmp/a%20b,guid=123", "/tmp/a b"},
		{"unix:abstract=/tmp/dbus-x", "@/tmp/dbus-x"},
		{"tcp:host=127.0.0.1,port=1", ""},
		{"unix:guid=1", ""},
		{"unix:path=/tmp/%zz", ""},
	} {
		got, err := socketPath(tc.in)
		if tc.want == "" && err == nil || tc.want != "" && (err != nil || got != tc.want) {
			t.Errorf("%q: got %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

// Whatever a bus sends, decoding ends, with values or an error, and never
// panics.
func FuzzDecodeBody(f *testing.F) {
	f.Add("a(ssssssouso)", []byte{8, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 'a', 0})
	f.Add("v", []byte{1, 't', 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8})
	f.Add("a()", []byte{8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add("a{sv}s", []byte{0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 'x', 0})
	f.Fuzz(func(t *testing.T, sig string, body []byte) {
		if len(sig) > 255 {
			return
		}
		decodeBody(binary.LittleEndian, body, sig)
		decodeBody(binary.BigEndian, body, sig)
	})
}
