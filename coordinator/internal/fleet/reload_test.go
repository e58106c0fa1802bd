package fleet

import (
	"testing"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
	"google.golang.org/protobuf/proto"
)

// FuzzDecodeState: decoding a state read again, sharing sections with the
// state read before, gives exactly what decoding it afresh gives, whatever
// the bytes (they were an agent's before a replica saved them), and fails
// where that fails.
func FuzzDecodeState(f *testing.F) {
	full, _ := proto.Marshal(&gridcityv1.StateUpdate{Full: true, CollectedUnixMs: 1,
		Host:        &gridcityv1.HostInfo{Hostname: "web-1", Addresses: []string{"10.0.0.1"}, UptimeSeconds: 5},
		Cpu:         &gridcityv1.CPU{Cores: 4},
		Listeners:   &gridcityv1.Listeners{Items: []*gridcityv1.Listener{{Address: "0.0.0.0", Port: 80, Proto: "tcp"}}},
		Connections: &gridcityv1.Connections{Items: []*gridcityv1.Connection{{RemoteAddress: "10.0.0.9", RemotePort: 5432}}}})
	cpu, _ := proto.Marshal(&gridcityv1.StateUpdate{Cpu: &gridcityv1.CPU{Cores: 8}})
	f.Add(full, full)
	f.Add(full, append(append([]byte{}, full...), cpu...)) // a section twice: merged
	f.Add(cpu, full)
	f.Add([]byte{0x1a, 0x02, 0x0a}, full)
	f.Fuzz(func(t *testing.T, before, after []byte) {
		var seen readSections
		prev, _, err := decodeState(before, &gridcityv1.StateUpdate{}, &seen)
		if err != nil {
			prev, seen = &gridcityv1.StateUpdate{}, readSections{}
		}
		want := &gridcityv1.StateUpdate{}
		werr := proto.Unmarshal(after, want)
		got, _, err := decodeState(after, prev, &seen)
		if err == errRepeated {
			return // decoded whole by the caller
		}
		if (err == nil) != (werr == nil) {
			t.Fatalf("decodeState error %v, proto.Unmarshal error %v", err, werr)
		}
		if err == nil && !proto.Equal(got, want) {
			t.Fatalf("decodeState gave %v; decoding afresh gives %v", got, want)
		}
	})
}

// A section read again unchanged is the one made before; a changed one is new.
func TestDecodeStateKeepsUnchangedSections(t *testing.T) {
	one := &gridcityv1.StateUpdate{Cpu: &gridcityv1.CPU{Cores: 4}, Listeners: &gridcityv1.Listeners{Items: []*gridcityv1.Listener{{Port: 80}}}}
	raw, _ := proto.Marshal(one)
	var seen readSections
	prev, shape, err := decodeState(raw, &gridcityv1.StateUpdate{}, &seen)
	if err != nil || !shape {
		t.Fatalf("first read: %v, shape %v; want the listeners new", err, shape)
	}
	one.Cpu.Cores = 8
	raw, _ = proto.Marshal(one)
	next, shape, err := decodeState(raw, prev, &seen)
	if err != nil || shape || next.GetListeners() != prev.GetListeners() || next.GetCpu() == prev.GetCpu() || next.GetCpu().GetCores() != 8 {
		t.Fatalf("second read: %v, shape %v, listeners kept %v, cpu %v", err, shape, next.GetListeners() == prev.GetListeners(), next.GetCpu())
	}
}
