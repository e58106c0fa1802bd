package main

import (
	"strings"
	"testing"

	"github.com/gridcity/gridcity/coordinator/harness/netlab"
)

// A first-time user without nginx and PostgreSQL reads which programs are missing, from which
// packages, and the one line that installs them.
func TestMissingMessage(t *testing.T) {
	got := missingMessage([]netlab.Need{netlab.Nginx, netlab.Postgres})
	for _, want := range []string{
		"nginx        from the Debian package nginx",
		"postgres     from the Debian package postgresql",
		"sudo apt-get install -y nginx postgresql",
		"sudo make demo INSTALL=1",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("message:\n%s\nwant %q in it", got, want)
		}
	}
}
