package gridcityv1

import (
	"strings"
	"testing"
)

func TestParseJoinLine(t *testing.T) {
	pin := "sha256:" + strings.Repeat("0f", 32)
	tests := []struct {
		in      string
		want    JoinLine
		wantErr string
	}{
		{in: "gridcity://10.0.0.5:4601/tok_EN-1/" + pin, want: JoinLine{"10.0.0.5:4601", "tok_EN-1", pin}},
		{in: "  gridcity://[fd00::1]:4601/t/" + pin + "\n", want: JoinLine{"[fd00::1]:4601", "t", pin}},
		{in: "gridcity://coord.example:4601/t/" + pin, want: JoinLine{"coord.example:4601", "t", pin}},
		{in: "https://10.0.0.5:4601/t/" + pin, wantErr: "is not valid"},
		{in: "gridcity://10.0.0.5/t/" + pin, wantErr: "without a port"},
		{in: "gridcity://10.0.0.5:4601/" + pin, wantErr: "lacks the token or the CA pin"},
		{in: "gridcity://10.0.0.5:4601/t/sha256:abc", wantErr: "not sha256: followed by 64 hex digits"},
		{in: "gridcity://10.0.0.5:4601/t/md5:" + strings.Repeat("0f", 32), wantErr: "not sha256:"},
		{in: "", wantErr: "is not valid"},
	}
	for _, tt := range tests {
		got, err := ParseJoinLine(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseJoinLine(%q) error %v; want %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseJoinLine(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
		}
		if again, _ := ParseJoinLine(got.String()); again != got {
			t.Errorf("round trip of %+v gave %+v", got, again)
		}
	}
}

func FuzzParseJoinLine(f *testing.F) {
	f.Add("gridcity://10.0.0.5:4601/tok/sha256:" + strings.Repeat("0f", 32))
	f.Add("gridcity://[::1]:1/a/b")
	f.Fuzz(func(t *testing.T, s string) {
		j, err := ParseJoinLine(s)
		if err != nil {
			if len(err.Error()) > 400 {
				t.Fatalf("error message of %d bytes echoes the input unbounded", len(err.Error()))
			}
			return
		}
		if CheckPin(j.CAPin) != nil || j.Token == "" || j.Coordinator == "" {
			t.Fatalf("accepted %q as %+v", s, j)
		}
	})
}
