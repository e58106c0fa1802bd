package collect

import (
	"math"
	"os"
	"strconv"
	"testing"
)

func TestParseStat(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    cpuTimes
		wantErr bool
	}{
		{
			name: "fixture",
			in:   mustRead(t, "testdata/proc/stat"),
			// total = 4705+150+1120+16250+520+0+34+12; idle+iowait = 16770
			want: cpuTimes{busy: 6021, total: 22791, cores: 4},
		},
		{
			name: "guest time is not counted twice",
			in:   "cpu  100 0 0 100 0 0 0 0 50 50\ncpu0 100 0 0 100 0 0 0 0 50 50\n",
			want: cpuTimes{busy: 100, total: 200, cores: 1},
		},
		{
			name: "old kernel with four counters",
			in:   "cpu  10 0 10 80\ncpu0 10 0 10 80\nintr 1\n",
			want: cpuTimes{busy: 20, total: 100, cores: 1},
		},
		{
			name: "stops after the cpu lines",
			in:   "cpu  1 0 1 8 0\ncpu0 1 0 1 8 0\nintr 1\ncpu1 1 1 1 1 1\n",
			want: cpuTimes{busy: 2, total: 10, cores: 1},
		},
		{
			name: "overflowing counters saturate",
			in:   "cpu  18446744073709551615 18446744073709551615 0 0 0\n",
			want: cpuTimes{busy: math.MaxUint64, total: math.MaxUint64},
		},
		{name: "no cpu line", in: "intr 1\nbtime 2\n", wantErr: true},
		{name: "too few counters", in: "cpu  1 2 3\n", wantErr: true},
		{name: "not a number", in: "cpu  1 2 x 4 5\n", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseStat(linesOf([]byte(tt.in), maxStatLines))
			if (err != nil) != tt.wantErr {
				t.Fatalf("got error %v; want error %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("got %+v; want %+v", got, tt.want)
			}
		})
	}
}

func FuzzParseStat(f *testing.F) {
	f.Add([]byte("cpu  4705 150 1120 16250 520 0 34 12 0 0\ncpu0 1 2 3 4 5\nintr 1 2\n"))
	f.Add([]byte("cpu  10 0 10 80\n"))
	f.Add([]byte("cpu  18446744073709551615 18446744073709551615 0 0 0\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := parseStat(linesOf(data, maxStatLines))
		if err != nil {
			return
		}
		if got.busy > got.total || got.cores > maxCores {
			t.Fatalf("got %+v: busy above total or too many cores", got)
		}
		if p, _ := busyPercent(cpuTimes{}, got, nil); p != nil {
			t.Fatalf("first sample: busy %v; want unknown", *p)
		}
		half := cpuTimes{busy: got.busy / 2, total: got.total / 2}
		if p, _ := busyPercent(half, got, nil); p != nil && (*p < 0 || *p > 100 || math.IsNaN(*p)) {
			t.Fatalf("busy percent %v out of [0, 100]", *p)
		}
	})
}

func TestBusyPercent(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	tests := []struct {
		name       string
		prev, cur  cpuTimes
		last, want *float64
	}{
		{"first sample is unknown, not since boot", cpuTimes{}, cpuTimes{busy: 25, total: 100}, nil, nil},
		{"delta", cpuTimes{busy: 25, total: 100}, cpuTimes{busy: 75, total: 200}, f(25), f(50)},
		{"idle", cpuTimes{busy: 25, total: 100}, cpuTimes{busy: 25, total: 200}, f(25), f(0)},
		{"no new ticks keeps the last figure", cpuTimes{busy: 25, total: 100}, cpuTimes{busy: 25, total: 100}, f(42), f(42)},
		{"no new ticks after the first: still unknown", cpuTimes{busy: 25, total: 100}, cpuTimes{busy: 25, total: 100}, nil, nil},
		{"counters went back: unknown", cpuTimes{busy: 500, total: 1000}, cpuTimes{busy: 10, total: 100}, f(42), nil},
	}
	for _, tt := range tests {
		got, why := busyPercent(tt.prev, tt.cur, tt.last)
		if (got == nil) != (tt.want == nil) || got != nil && *got != *tt.want {
			t.Errorf("%s: got %v; want %v", tt.name, fmtPtr(got), fmtPtr(tt.want))
		}
		if got == nil && why == "" {
			t.Errorf("%s: unknown without a reason", tt.name)
		}
	}
}

func fmtPtr(p *float64) string {
	if p == nil {
		return "unknown"
	}
	return strconv.FormatFloat(*p, 'g', -1, 64)
}

func TestParseLoadavg(t *testing.T) {
	tests := []struct {
		in          string
		l1, l5, l15 float64
		wantErr     bool
	}{
		{"0.52 0.58 0.59 2/1234 5678\n", 0.52, 0.58, 0.59, false},
		{"12.00 8.50 4.25 1/1 1", 12, 8.5, 4.25, false},
		{"0.52 0.58\n", 0, 0, 0, true},
		{"NaN 1 1 1/1 1\n", 0, 0, 0, true},
		{"-1 1 1 1/1 1\n", 0, 0, 0, true},
		{"", 0, 0, 0, true},
	}
	for _, tt := range tests {
		l1, l5, l15, err := parseLoadavg(linesOf([]byte(tt.in), 1))
		if (err != nil) != tt.wantErr || l1 != tt.l1 || l5 != tt.l5 || l15 != tt.l15 {
			t.Errorf("parseLoadavg(%q) = %v %v %v, %v; want %v %v %v, error %v", tt.in, l1, l5, l15, err, tt.l1, tt.l5, tt.l15, tt.wantErr)
		}
	}
}

func FuzzParseLoadavg(f *testing.F) {
	f.Add([]byte("0.52 0.58 0.59 2/1234 5678\n"))
	f.Add([]byte("Inf 1 1"))
	f.Fuzz(func(t *testing.T, data []byte) {
		l1, l5, l15, err := parseLoadavg(linesOf(data, 1))
		if err != nil {
			return
		}
		for _, v := range []float64{l1, l5, l15} {
			if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
				t.Fatalf("load %v is not a finite non-negative number", v)
			}
		}
	})
}

func TestParseCPUModel(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"x86 fixture", mustRead(t, "testdata/proc/cpuinfo"), "Intel(R) Xeon(R) Gold 6248 CPU @ 2.50GHz"},
		{"raspberry pi: model at the end", "processor\t: 0\nBogoMIPS\t: 108.00\nCPU part\t: 0xd08\n\nHardware\t: BCM2835\nModel\t\t: Raspberry Pi 4 Model B Rev 1.4\n", "Raspberry Pi 4 Model B Rev 1.4"},
		{"power", "processor\t: 0\ncpu\t\t: POWER9 (architected), altivec supported\n", "POWER9 (architected), altivec supported"},
		{"arm64 without a name", "processor\t: 0\nBogoMIPS\t: 50.00\nCPU implementer\t: 0x41\n", ""},
		{"cpu MHz is not a model", "cpu MHz\t\t: 2499.998\n", ""},
		{"control characters cleaned", "model name\t: evil\x1b[2Jcpu\n", "evil?[2Jcpu"},
	}
	for _, tt := range tests {
		if got := parseCPUModel(linesOf([]byte(tt.in), maxCPUInfoLines)); got != tt.want {
			t.Errorf("%s: got %q; want %q", tt.name, got, tt.want)
		}
	}
}

func FuzzParseCPUModel(f *testing.F) {
	f.Add([]byte("model name\t: Intel(R) Xeon(R)\n"))
	f.Add([]byte("Model\t: Raspberry Pi\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if got := parseCPUModel(linesOf(data, maxCPUInfoLines)); len(got) > maxName || !fitText(got) {
			t.Fatalf("model %q is too long or not clean", got)
		}
	})
}

func mustRead(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
