package mcpserver

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/gridcity/gridcity/coordinator/internal/command"
	"github.com/gridcity/gridcity/coordinator/internal/fleetview"
)

// TestCommandResultFitsTheBudget: a finished command's two streams at
// their full 8 KB + 24 KB, made of bytes JSON escapes six times over, and a
// command of 16 KB of them, answer within the budget with arguments; the
// head and the tail of each stream are kept, and every byte cut is
// counted. Output that fits is untouched.
func TestCommandResultFitsTheBudget(t *testing.T) {
	stream := func(head, tail string) command.Output {
		return command.Output{Text: strings.Repeat(head, command.HeadBytes) + "\n[… 1000 bytes left out …]\n" + strings.Repeat(tail, command.TailBytes), Omitted: 1000}
	}
	for _, c := range []struct {
		name        string
		req         command.Request
		wantCut     bool
		wantCommand bool
	}{
		{"small", command.Request{Command: "uptime", Stdout: command.Output{Text: "up 3 days\n"}}, false, true},
		{"escaped streams", command.Request{Command: "cat /dev/urandom", Stdout: stream("<", ">"), Stderr: stream("\x01", "&")}, true, true},
		{"plain long stdout, no stderr", command.Request{Command: "seq", Stdout: stream("a", "z")}, false, true},
		{"one stream without a marker", command.Request{Command: "x", Stdout: command.Output{Text: strings.Repeat("<", command.HeadBytes+command.TailBytes)}}, true, true},
		{"escaped command", command.Request{Command: strings.Repeat("&", 16<<10), Stdout: stream("<", ">")}, true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.req.ID, c.req.Server, c.req.Status = "r-1", "web-1", command.StatusCompleted
			out := resultOf(c.req, "http://app")
			b, _ := json.Marshal(out)
			if len(b) > fleetview.ArgsBudget {
				t.Fatalf("%d characters; want at most %d", len(b), fleetview.ArgsBudget)
			}
			for _, s := range []struct {
				name string
				in   command.Output
				got  string
				cut  func(*Truncated) int64
			}{
				{"stdout", c.req.Stdout, out.Stdout, func(tr *Truncated) int64 { return tr.Stdout }},
				{"stderr", c.req.Stderr, out.Stderr, func(tr *Truncated) int64 { return tr.Stderr }},
			} {
				if s.in.Text == "" {
					continue
				}
				if !c.wantCut {
					if s.got != s.in.Text {
						t.Errorf("%s changed though the answer fits", s.name)
					}
					continue
				}
				if s.got == s.in.Text || out.Truncated == nil {
					t.Fatalf("%s not cut", s.name)
				}
				// What is kept plus what is counted is the stream.
				m := leftOut.FindStringSubmatchIndex(s.got)
				if m == nil {
					t.Fatalf("%s has no marker: %.80q", s.name, s.got)
				}
				head, tail := s.got[:m[0]], s.got[m[1]:]
				inHead, inTail := s.in.Text, ""
				if im := leftOut.FindStringSubmatchIndex(s.in.Text); im != nil {
					inHead, inTail = s.in.Text[:im[0]], s.in.Text[im[1]:]
				}
				whole := int64(len(inHead)+len(inTail)) + s.in.Omitted
				if kept := int64(len(head) + len(tail)); kept+s.cut(out.Truncated) != whole || len(head) == 0 || len(tail) == 0 {
					t.Errorf("%s: %d kept (head %d, tail %d) and %d counted; want %d in all, with a head and a tail", s.name, kept, len(head), len(tail), s.cut(out.Truncated), whole)
				}
				if !strings.HasPrefix(s.in.Text, head) || !strings.HasSuffix(s.in.Text, tail) || !strings.Contains(s.got, " bytes left out …]") {
					t.Errorf("%s: not the stream's head and tail", s.name)
				}
			}
			if c.wantCommand != (out.Command == c.req.Command) {
				t.Errorf("command echoed whole: %v; want %v", out.Command == c.req.Command, c.wantCommand)
			}
		})
	}
}
