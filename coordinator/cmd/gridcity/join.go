package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"time"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"

	"github.com/gridcity/gridcity/coordinator/internal/agentapi"
	"github.com/gridcity/gridcity/coordinator/internal/loopback"
	"github.com/gridcity/gridcity/coordinator/internal/pki"
	"github.com/gridcity/gridcity/coordinator/internal/store"
)

func cmdJoin(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("join", stderr)
	sf := addStoreFlags(fs)
	data := sf.data
	ttl := fs.Duration("ttl", time.Hour, "how long the join line is valid")
	reusable := fs.Bool("reusable", false, "let the join line enroll several agents until it expires (for provisioning many servers)")
	coordinator := fs.String("coordinator", "", "HOST:PORT agents dial (default: what the running coordinator advertises)")
	asJSON := fs.Bool("json", false, `print {"coordinator","token","caPin","joinLine","expiresAt"}`)
	if err := parse(fs, args); err != nil {
		return err
	}
	if *ttl < time.Minute || *ttl > 30*24*time.Hour {
		return fmt.Errorf("--ttl %s is out of range: use between 1m and 720h", *ttl)
	}
	addr := *coordinator
	if addr == "" {
		info, err := readRuntime(*data)
		if err != nil {
			return err
		}
		addr = info.Advertise
	}
	st, err := sf.openExisting(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	// The pin is the certificate's: join never needs the CA's key (nor
	// the unseal key that opens it).
	caCert, err := pki.LoadCertificate(ctx, st)
	if err != nil {
		return err
	}
	pin := pki.Pin(caCert.Raw)
	token, err := randomToken()
	if err != nil {
		return err
	}
	now := time.Now()
	exp := now.Add(*ttl)
	if err := st.CreateJoinToken(ctx, store.JoinToken{Hash: agentapi.HashToken(token), CreatedAt: now, ExpiresAt: exp, SingleUse: !*reusable}); err != nil {
		return err
	}
	line := gridcityv1.JoinLine{Coordinator: addr, Token: token, CAPin: pin}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"coordinator": addr, "token": token, "caPin": pin, "joinLine": line.String(), "expiresAt": exp.UTC().Format(time.RFC3339), "singleUse": !*reusable})
	}
	if loopback.Host(addr) {
		fmt.Fprintf(stderr, "note: this join line names %s, a loopback address: only an agent on this host can use it. Start the coordinator with --advertise HOST:PORT, or pass --coordinator HOST:PORT here.\n\n", addr)
	}
	use := "one agent"
	if *reusable {
		use = "any number of agents"
	}
	fmt.Fprintf(stdout, `Join line (enrolls %s, valid until %s):

  %s

On the server, as root, with the agent binary and this repository's deploy/ folder:

  deploy/install-agent.sh %s

or, to try it in the foreground (state in ./agent-state, named after the host unless --name):

  gridcity-agent run --state ./agent-state --join %s
`, use, exp.Local().Format("2006-01-02 15:04 MST"), line, line, line)
	return nil
}

func randomToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}
