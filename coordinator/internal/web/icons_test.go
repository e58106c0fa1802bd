package web

import (
	"bytes"
	"flag"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "write the icons in assets/ again")

// icon draws the app's mark, as favicon.svg draws it: a blue square with
// rounded corners and four white squares. A maskable icon fills its whole
// square with the blue and keeps the mark inside the middle 80 %, the
// safe zone a launcher's mask never cuts.
func icon(size int, maskable bool) *image.NRGBA {
	img := image.NewNRGBA(image.Rect(0, 0, size, size))
	blue, white := color.NRGBA{0x25, 0x63, 0xeb, 0xff}, color.NRGBA{0xff, 0xff, 0xff, 0xff}
	unit := float64(size) / 16 // favicon.svg's viewBox is 16 units
	radius := 3 * unit
	origin, scale := 0.0, 1.0
	if maskable {
		radius = 0
		origin, scale = 0.1*float64(size), 0.8 // the whole 16 units in the middle 80 %
	}
	for y := range size {
		for x := range size {
			fx, fy := float64(x)+0.5, float64(y)+0.5
			if inRounded(fx, fy, float64(size), radius) {
				img.SetNRGBA(x, y, blue)
			}
			// The four squares: 4..7 and 9..12 in both directions.
			ux, uy := (fx-origin)/(unit*scale), (fy-origin)/(unit*scale)
			if in := func(u float64) bool { return (u >= 4 && u < 7) || (u >= 9 && u < 12) }; in(ux) && in(uy) {
				img.SetNRGBA(x, y, white)
			}
		}
	}
	return img
}

// inRounded reports whether (x, y) is inside a size×size square whose
// corners are rounded with radius r.
func inRounded(x, y, size, r float64) bool {
	cx, cy := min(max(x, r), size-r), min(max(y, r), size-r)
	dx, dy := x-cx, y-cy
	return dx*dx+dy*dy <= r*r
}

// The icons the manifest names are these drawings, byte for byte: run
// with -update (after changing the drawing) to write them again.
func TestIcons(t *testing.T) {
	for _, c := range []struct {
		file     string
		size     int
		maskable bool
	}{{"icon-192.png", 192, false}, {"icon-512.png", 512, false}, {"icon-maskable-512.png", 512, true}} {
		var b bytes.Buffer
		enc := png.Encoder{CompressionLevel: png.BestCompression}
		if err := enc.Encode(&b, icon(c.size, c.maskable)); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join("assets", c.file)
		if *update {
			if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (go test -run TestIcons -update writes it)", err)
		}
		if !bytes.Equal(got, b.Bytes()) {
			t.Errorf("%s is not the app's icon as icon() draws it; go test -run TestIcons -update", path)
		}
		img, err := png.Decode(bytes.NewReader(got))
		if err != nil || img.Bounds().Dx() != c.size || img.Bounds().Dy() != c.size {
			t.Fatalf("%s: %v, %v; want %d×%d", path, err, img.Bounds(), c.size, c.size)
		}
		// A maskable icon has no transparent corner for the mask to show.
		if _, _, _, a := img.At(0, 0).RGBA(); c.maskable != (a != 0) {
			t.Errorf("%s: corner alpha %d", path, a)
		}
	}
}
