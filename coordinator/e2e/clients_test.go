package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// tsclientInstall is the one install of the pinned Node.js clients
// (tsclient/package-lock.json) for the whole test binary: tests run in
// parallel, and two `npm ci` in one directory would tread on each other.
var tsclientInstall struct {
	once sync.Once
	node string
	err  error
}

// nodeClients installs the pinned TypeScript MCP clients and returns the
// pinned Node.js 22 that runs them (the Inspector and the conformance suite
// need Node 22; the machine's node only runs npm).
func nodeClients(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("npm"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("npm is not installed; .ci/run must install Node.js and npm")
		}
		t.Skip("npm is not installed: the TypeScript client tests need Node.js and npm")
	}
	tsclientInstall.once.Do(func() {
		out, err := exec.Command("bash", "tsclient/install.sh").CombinedOutput()
		if err != nil {
			tsclientInstall.err = fmt.Errorf("npm install of the TypeScript clients (tsclient/install.sh): %v\n%s", err, out)
			return
		}
		tsclientInstall.node, tsclientInstall.err = filepath.Abs("tsclient/node_modules/.bin/node")
	})
	if tsclientInstall.err != nil {
		t.Fatal(tsclientInstall.err)
	}
	return tsclientInstall.node
}
