package pki

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"log/slog"
	"math/big"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"

	"github.com/gridcity/gridcity/coordinator/internal/sealing"
	"github.com/gridcity/gridcity/coordinator/internal/store"
)

// memStore is the CA's part of the store, in memory, with the failures a
// real one can have.
type memStore struct {
	mu      sync.Mutex
	blobs   map[string][]byte
	blobErr error // returned by Blob
	putErr  error // returned by PutBlobIfAbsent
	// hideFromBlob makes Blob say not found whatever is stored: another
	// coordinator stored its CA between this one's read and its write.
	hideFromBlob bool
	puts         int
	// swaps counts the SwapBlob calls that wrote; beforeSwap, when set,
	// runs before each, as another coordinator would.
	swaps      int
	beforeSwap func(m *memStore)
}

func newMemStore() *memStore { return &memStore{blobs: map[string][]byte{}} }

func (m *memStore) Blob(_ context.Context, key string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.blobErr != nil {
		return nil, m.blobErr
	}
	v, ok := m.blobs[key]
	if !ok || m.hideFromBlob {
		return nil, store.ErrNotFound
	}
	return v, nil
}

func (m *memStore) PutBlobIfAbsent(_ context.Context, key string, value []byte) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.puts++
	if m.putErr != nil {
		return nil, m.putErr
	}
	if _, ok := m.blobs[key]; !ok {
		m.blobs[key] = value
	}
	return m.blobs[key], nil
}

func (m *memStore) SwapBlob(_ context.Context, key string, old, value []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.beforeSwap != nil {
		m.beforeSwap(m)
	}
	v, ok := m.blobs[key]
	switch {
	case !ok:
		return store.ErrNotFound
	case !bytes.Equal(v, old):
		return store.ErrBlobChanged
	}
	m.blobs[key] = value
	m.swaps++
	return nil
}

// testUnseal is the unseal key of the tests' coordinators.
var testUnseal = mustKey(1)

func mustKey(fill byte) *sealing.Key {
	k, err := sealing.KeyFromBytes(bytes.Repeat([]byte{fill}, sealing.KeySize))
	if err != nil {
		panic(err)
	}
	return k
}

var discard = slog.New(slog.DiscardHandler)

// loadWith is LoadOrCreate with the tests' unseal key.
func loadWith(st Store) (*CA, error) {
	return LoadOrCreate(context.Background(), st, testUnseal, discard)
}

// load is LoadOrCreate, which must succeed.
func load(t testing.TB, st Store) *CA {
	t.Helper()
	ca, err := loadWith(st)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func newCA(t testing.TB) *CA { return load(t, newMemStore()) }

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func newCSR(t testing.TB, key crypto.Signer, tmpl *x509.CertificateRequest) []byte {
	t.Helper()
	if tmpl == nil {
		tmpl = &x509.CertificateRequest{Subject: pkix.Name{CommonName: "web-1"}}
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

// checkValidity checks that c is valid from an hour before issue for
// lifetime after it.
func checkValidity(t *testing.T, c *x509.Certificate, issued time.Time, lifetime time.Duration) {
	t.Helper()
	const slack = 5 * time.Second // DER times are in whole seconds; the test takes a moment
	if d := c.NotBefore.Sub(issued.Add(-time.Hour)); d < -slack || d > slack {
		t.Errorf("NotBefore %v; want an hour before %v (clock skew)", c.NotBefore, issued)
	}
	if d := c.NotAfter.Sub(issued.Add(lifetime)); d < -slack || d > slack {
		t.Errorf("NotAfter %v; want %v after %v", c.NotAfter, lifetime, issued)
	}
}

const year = 365 * 24 * time.Hour

func TestLoadOrCreateMakesACA(t *testing.T) {
	st := newMemStore()
	created := time.Now()
	ca, err := loadWith(st)
	if err != nil {
		t.Fatal(err)
	}
	c := ca.Cert()
	if !c.IsCA || !c.BasicConstraintsValid || c.MaxPathLen != 0 || !c.MaxPathLenZero {
		t.Errorf("CA constraints: IsCA %v, valid %v, MaxPathLen %d (zero %v); want a CA that signs leaves only", c.IsCA, c.BasicConstraintsValid, c.MaxPathLen, c.MaxPathLenZero)
	}
	if want := x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature; c.KeyUsage != want {
		t.Errorf("KeyUsage %b; want %b", c.KeyUsage, want)
	}
	if c.Subject.CommonName != "gridcity CA" || !slices.Equal(c.Subject.Organization, []string{"gridcity"}) {
		t.Errorf("subject %q; want CN=gridcity CA, O=gridcity", c.Subject)
	}
	if err := c.CheckSignatureFrom(c); err != nil {
		t.Errorf("the CA is not self-signed: %v", err)
	}
	if pub, ok := c.PublicKey.(*ecdsa.PublicKey); !ok || pub.Curve != elliptic.P256() {
		t.Errorf("CA key %T; want ECDSA P-256", c.PublicKey)
	}
	checkValidity(t, c, created, 10*year)
	if c.SerialNumber.Sign() <= 0 {
		t.Errorf("serial %v; want positive", c.SerialNumber)
	}

	// What is stored is the certificate and its key sealed, in PEM.
	if types := blockTypes(t, st.blobs["ca.pem"], c); !slices.Equal(types, []string{"CERTIFICATE", "GRIDCITY SEALED CA KEY"}) {
		t.Errorf("stored PEM blocks %v; want the certificate and its sealed key", types)
	}
	checkKeySealed(t, st.blobs["ca.pem"], ca)
}

// blockTypes lists the PEM blocks of a stored CA, checking that its
// certificate is c.
func blockTypes(t *testing.T, blob []byte, c *x509.Certificate) []string {
	t.Helper()
	var types []string
	for rest := blob; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		types = append(types, b.Type)
		if b.Type == "CERTIFICATE" && !bytes.Equal(b.Bytes, c.Raw) {
			t.Error("the stored certificate is not the CA's")
		}
	}
	return types
}

// checkKeySealed checks that the CA's private key is nowhere in blob in
// the clear: not its DER, not its scalar, no PEM block of a private key.
func checkKeySealed(t *testing.T, blob []byte, ca *CA) {
	t.Helper()
	der, err := x509.MarshalECPrivateKey(ca.key)
	if err != nil {
		t.Fatal(err)
	}
	pkcs8, _ := x509.MarshalPKCS8PrivateKey(ca.key)
	scalar, _ := ca.key.Bytes()
	for name, secret := range map[string][]byte{"DER": der, "PKCS#8": pkcs8, "scalar": scalar} {
		if bytes.Contains(blob, secret) {
			t.Errorf("the CA key's %s is in the store in the clear", name)
		}
	}
	if bytes.Contains(blob, []byte("BEGIN EC PRIVATE KEY")) || bytes.Contains(blob, []byte("BEGIN PRIVATE KEY")) {
		t.Error("a private key PEM block is in the store in the clear")
	}
}

// The CA is created once: a second start, or a second coordinator on the
// same store, loads the same one.
func TestLoadOrCreateLoadsTheStoredCA(t *testing.T) {
	st := newMemStore()
	first, again := load(t, st), load(t, st)
	if !bytes.Equal(first.Cert().Raw, again.Cert().Raw) || first.Pin() != again.Pin() {
		t.Fatalf("second load pin %s; want the first's %s", again.Pin(), first.Pin())
	}
	if st.puts != 1 {
		t.Errorf("%d writes; want one, at creation", st.puts)
	}
	// The loaded key is the CA's: what it issues verifies against the first.
	cert, err := again.ServerCertificate()
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(cert.Certificate[0])
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: first.Pool(), DNSName: ServerName}); err != nil {
		t.Fatalf("a certificate issued by the reloaded CA: %v", err)
	}
}

// Two coordinators racing to create the CA both end up with the one
// stored first.
func TestLoadOrCreateLosesTheRace(t *testing.T) {
	st := newMemStore()
	winner := load(t, st)
	st.hideFromBlob = true // the loser read before the winner wrote
	loser := load(t, st)
	if loser.Pin() != winner.Pin() {
		t.Fatalf("the loser uses CA %s; want the stored %s", loser.Pin(), winner.Pin())
	}
}

// The same race on the real store, with the coordinators at it at once.
func TestLoadOrCreateConcurrentOnSQLite(t *testing.T) {
	ctx := context.Background()
	st, err := store.OpenSQLite(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	pins := make([]string, 4)
	var wg sync.WaitGroup
	for i := range pins {
		wg.Go(func() {
			ca, err := LoadOrCreate(ctx, st, testUnseal, discard)
			if err != nil {
				t.Error(err)
				return
			}
			pins[i] = ca.Pin()
		})
	}
	wg.Wait()
	if got := slices.Compact(slices.Clone(pins)); len(got) != 1 || got[0] == "" {
		t.Fatalf("pins %v; want one CA for all", pins)
	}
}

func TestLoadOrCreateStoreFailures(t *testing.T) {
	broken := errors.New("disk I/O error")
	for _, tt := range []struct {
		name string
		st   *memStore
	}{
		{"read fails", &memStore{blobs: map[string][]byte{}, blobErr: broken}},
		{"write fails", &memStore{blobs: map[string][]byte{}, putErr: broken}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ca, err := loadWith(tt.st)
			if ca != nil || !errors.Is(err, broken) {
				t.Fatalf("got %v, %v; want the store's error", ca, err)
			}
		})
	}
}

// A stored CA that cannot be read stops the start with an error that says
// so; it is never replaced by a new one, which would orphan every agent.
func TestLoadOrCreateMalformedStoredCA(t *testing.T) {
	good := newMemStore()
	load(t, good)
	blob := good.blobs["ca.pem"]
	certPEM, keyPEM := splitBlob(t, blob)
	block := func(typ string, b []byte) []byte { return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}) }
	for _, tt := range []struct {
		name string
		blob []byte
		want string // "" for a CA that loads
	}{
		{"as stored", blob, ""},
		{"key first", slices.Concat(keyPEM, certPEM), ""},
		{"with text and other blocks around", slices.Concat([]byte("# gridcity CA\n"), block("COMMENT", []byte("x")), blob, []byte("\ntrailing")), ""},
		{"empty", nil, "stored CA is incomplete: certificate missing"},
		{"not PEM", []byte("not a certificate"), "stored CA is incomplete: certificate missing"},
		{"certificate only", certPEM, "stored CA is incomplete: key missing"},
		{"key only", keyPEM, "stored CA is incomplete: certificate missing"},
		{"certificate of garbage", slices.Concat(block("CERTIFICATE", []byte("garbage")), keyPEM), "parse stored CA: x509:"},
		{"sealed key of garbage", slices.Concat(certPEM, block("GRIDCITY SEALED CA KEY", []byte("garbage"))), "sealed with another unseal key"},
		{"clear key of garbage", slices.Concat(certPEM, block("EC PRIVATE KEY", []byte("garbage"))), "parse stored CA: x509:"},
		{"truncated", blob[:len(blob)/2], "stored CA is incomplete"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			st := newMemStore()
			st.blobs["ca.pem"] = tt.blob
			ca, err := loadWith(st)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("got %v; want the CA loaded", err)
			case tt.want == "" && ca.Pin() != Pin(good.mustCert(t).Raw):
				t.Fatalf("loaded %s; want the stored CA", ca.Pin())
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("got %v, %v; want an error with %q", ca, err, tt.want)
			}
			if st.puts != 0 || st.swaps != 0 {
				t.Error("the stored CA was written over")
			}
		})
	}
}

// splitBlob cuts a stored CA into its certificate's PEM and its key's.
func splitBlob(t *testing.T, blob []byte) (certPEM, keyPEM []byte) {
	t.Helper()
	const end = "-----END CERTIFICATE-----\n"
	i := bytes.Index(blob, []byte(end))
	if i < 0 {
		t.Fatalf("no certificate in %q", blob)
	}
	i += len(end)
	return blob[:i:i], blob[i:]
}

func (m *memStore) mustCert(t *testing.T) *x509.Certificate {
	t.Helper()
	b, _ := pem.Decode(m.blobs["ca.pem"])
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A stored certificate with another CA's key is refused at load, sealed
// (it is bound to its own certificate and does not open beside another)
// or in the clear (it is not the certificate's key): a bad store must not
// lead to certificates that no agent can verify.
func TestStoredCAWithAnotherKeyIsRefused(t *testing.T) {
	a, b := newMemStore(), newMemStore()
	load(t, a)
	caB := load(t, b)
	certA, _ := splitBlob(t, a.blobs["ca.pem"])
	_, keyB := splitBlob(t, b.blobs["ca.pem"])
	for name, blob := range map[string][]byte{
		"sealed":       slices.Concat(certA, keyB),
		"in the clear": slices.Concat(certA, clearKeyPEM(t, caB)),
	} {
		mixed := newMemStore()
		mixed.blobs["ca.pem"] = blob
		if ca, err := loadWith(mixed); err == nil {
			t.Errorf("%s: loaded %s with another CA's key; want refused", name, ca.Pin())
		}
		if mixed.swaps != 0 {
			t.Errorf("%s: the stored CA was written over", name)
		}
	}
}

// clearKeyPEM is ca's key as an older gridcity stored it.
func clearKeyPEM(t *testing.T, ca *CA) []byte {
	t.Helper()
	der, err := x509.MarshalECPrivateKey(ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
}

// olderStore is a store where an older gridcity kept ca's key in the clear.
func olderStore(t *testing.T, ca *CA) *memStore {
	t.Helper()
	st := newMemStore()
	st.blobs["ca.pem"] = slices.Concat(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.cert.Raw}), clearKeyPEM(t, ca))
	return st
}

// An older gridcity's store, its CA key in the clear, is upgraded at the
// first start with an unseal key: the same CA, its key sealed in the store
// and the clear one gone, and the log says so. The next start loads it as
// any sealed CA.
func TestLoadOrCreateSealsAnOlderStoresKey(t *testing.T) {
	old := newCA(t)
	st := olderStore(t, old)
	var log bytes.Buffer
	ca, err := LoadOrCreate(context.Background(), st, testUnseal, slog.New(slog.NewTextHandler(&log, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if ca.Pin() != old.Pin() || !ca.key.Equal(old.key) {
		t.Fatalf("upgraded to CA %s; want the stored %s with its key", ca.Pin(), old.Pin())
	}
	if st.swaps != 1 || st.puts != 0 {
		t.Fatalf("%d swaps, %d puts; want the blob rewritten once", st.swaps, st.puts)
	}
	if types := blockTypes(t, st.blobs["ca.pem"], old.cert); !slices.Equal(types, []string{"CERTIFICATE", "GRIDCITY SEALED CA KEY"}) {
		t.Fatalf("stored PEM blocks after the upgrade %v; want the certificate and its sealed key", types)
	}
	checkKeySealed(t, st.blobs["ca.pem"], old)
	if !strings.Contains(log.String(), "level=WARN") || !strings.Contains(log.String(), "sealed the CA key in the store") || !strings.Contains(log.String(), old.Pin()) {
		t.Errorf("the log does not say the key was sealed, with the CA's pin:\n%s", log.String())
	}
	again := load(t, st)
	if again.Pin() != old.Pin() || st.swaps != 1 {
		t.Fatalf("the next start: CA %s, %d swaps; want the same CA, nothing written", again.Pin(), st.swaps)
	}
	// A store holding both (the clear key put back beside the sealed one)
	// loses the clear one at the next start.
	st.blobs["ca.pem"] = slices.Concat(st.blobs["ca.pem"], clearKeyPEM(t, old))
	load(t, st)
	checkKeySealed(t, st.blobs["ca.pem"], old)
}

// Two coordinators upgrading one older store at once: the one that loses
// the swap reads the winner's sealed CA, which opens with the same key.
func TestLoadOrCreateSealsOnceWhenRacing(t *testing.T) {
	old := newCA(t)
	st := olderStore(t, old)
	winner := olderStore(t, old)
	load(t, winner) // the other coordinator's result
	st.beforeSwap = func(m *memStore) {
		m.beforeSwap = nil
		m.blobs["ca.pem"] = winner.blobs["ca.pem"]
	}
	ca := load(t, st)
	if ca.Pin() != old.Pin() || st.swaps != 0 || !bytes.Equal(st.blobs["ca.pem"], winner.blobs["ca.pem"]) {
		t.Fatalf("CA %s, %d swaps; want the stored CA, the winner's blob kept", ca.Pin(), st.swaps)
	}
}

// A CA sealed with another unseal key (a replica given the wrong file, a
// lone coordinator whose unseal.key was lost) stops the start with an
// error that says so; nothing is written.
func TestLoadOrCreateWithAnotherUnsealKey(t *testing.T) {
	st := newMemStore()
	load(t, st)
	blob := slices.Clone(st.blobs["ca.pem"])
	ca, err := LoadOrCreate(context.Background(), st, mustKey(2), discard)
	if ca != nil || !errors.Is(err, ErrSealedWithAnotherKey) {
		t.Fatalf("with another key: %v, %v; want ErrSealedWithAnotherKey", ca, err)
	}
	if !bytes.Equal(st.blobs["ca.pem"], blob) || st.swaps != 0 || st.puts != 1 {
		t.Fatal("the stored CA was written over")
	}
	if _, err := LoadOrCreate(context.Background(), st, nil, discard); err == nil || !strings.Contains(err.Error(), "no unseal key") {
		t.Fatalf("without a key: %v; want refused", err)
	}
}

// join needs the CA's certificate only: it reads it without the key, and
// says to start serve first on a store without a CA.
func TestLoadCertificate(t *testing.T) {
	st := newMemStore()
	if c, err := LoadCertificate(context.Background(), st); c != nil || !errors.Is(err, ErrNoCA) || !strings.Contains(err.Error(), "start `gridcity serve`") {
		t.Fatalf("no CA yet: %v, %v; want ErrNoCA saying to start serve", c, err)
	}
	ca := load(t, st)
	for name, st := range map[string]*memStore{"sealed": st, "older": olderStore(t, ca)} {
		c, err := LoadCertificate(context.Background(), st)
		if err != nil || Pin(c.Raw) != ca.Pin() {
			t.Fatalf("%s: %v; want the CA certificate", name, err)
		}
		if st.swaps != 0 {
			t.Fatalf("%s: LoadCertificate wrote the store", name)
		}
	}
	broken := errors.New("disk I/O error")
	if _, err := LoadCertificate(context.Background(), &memStore{blobErr: broken}); !errors.Is(err, broken) {
		t.Fatalf("a failing store: %v; want its error", err)
	}
}

func TestPin(t *testing.T) {
	ca := newCA(t)
	sum := sha256.Sum256(ca.Cert().Raw)
	if want := "sha256:" + hex.EncodeToString(sum[:]); ca.Pin() != want || Pin(ca.Cert().Raw) != want {
		t.Fatalf("pin %s; want %s", ca.Pin(), want)
	}
	if err := gridcityv1.CheckPin(ca.Pin()); err != nil {
		t.Fatalf("a join line would refuse the pin: %v", err)
	}
	if other := newCA(t); other.Pin() == ca.Pin() {
		t.Fatal("two CAs have the same pin")
	}
}

func TestServerCertificate(t *testing.T) {
	ca, other := newCA(t), newCA(t)
	for _, tt := range []struct {
		name  string
		extra []string
	}{
		{"plain", nil},
		{"with extra names", []string{"gridcity.example.com", "coordinator-2.lan"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			issued := time.Now()
			cert, err := ca.ServerCertificate(tt.extra...)
			if err != nil {
				t.Fatal(err)
			}
			// The chain carries the CA, so that an enrolling agent finds
			// the certificate its pin names (gridcityv1.FetchPinnedCA).
			if len(cert.Certificate) != 2 || !bytes.Equal(cert.Certificate[1], ca.Cert().Raw) || Pin(cert.Certificate[1]) != ca.Pin() {
				t.Fatalf("chain of %d; want the leaf and the CA", len(cert.Certificate))
			}
			leaf, err := x509.ParseCertificate(cert.Certificate[0])
			if err != nil {
				t.Fatal(err)
			}
			if leaf.Subject.CommonName != ServerName || !slices.Equal(leaf.DNSNames, append([]string{ServerName}, tt.extra...)) {
				t.Errorf("subject %q, names %v; want %s and %v", leaf.Subject, leaf.DNSNames, ServerName, tt.extra)
			}
			if leaf.IsCA || leaf.KeyUsage != x509.KeyUsageDigitalSignature || !slices.Equal(leaf.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}) {
				t.Errorf("IsCA %v, KeyUsage %b, ExtKeyUsage %v; want a server-only leaf", leaf.IsCA, leaf.KeyUsage, leaf.ExtKeyUsage)
			}
			checkValidity(t, leaf, issued, year)
			if pub, ok := cert.PrivateKey.(crypto.Signer); !ok || !pub.Public().(interface{ Equal(crypto.PublicKey) bool }).Equal(leaf.PublicKey) {
				t.Error("the private key is not the certificate's")
			}
			for _, name := range append([]string{ServerName}, tt.extra...) {
				if _, err := leaf.Verify(x509.VerifyOptions{Roots: ca.Pool(), DNSName: name, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
					t.Errorf("verify for %s: %v", name, err)
				}
			}
			if _, err := leaf.Verify(x509.VerifyOptions{Roots: ca.Pool(), DNSName: "elsewhere.example.com"}); err == nil {
				t.Error("verifies for a name it was not issued for")
			}
			if _, err := leaf.Verify(x509.VerifyOptions{Roots: ca.Pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err == nil {
				t.Error("the server certificate verifies as a client's")
			}
			var unknown x509.UnknownAuthorityError
			if _, err := leaf.Verify(x509.VerifyOptions{Roots: other.Pool(), DNSName: ServerName}); !errors.As(err, &unknown) {
				t.Errorf("verify against another CA: %v; want an unknown authority", err)
			}
		})
	}
}

func TestSignAgent(t *testing.T) {
	ca, other := newCA(t), newCA(t)
	_, edKey, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name    string
		key     crypto.Signer
		request *x509.CertificateRequest
	}{
		{"as the agent asks", newKey(t), nil},
		{"Ed25519 key", edKey, nil},
		// What the request asks for beyond its key is not granted: the
		// name is the enrolled one, and no names or addresses are added.
		{"asking for another name and SANs", newKey(t), &x509.CertificateRequest{
			Subject:        pkix.Name{CommonName: "db-1", Organization: []string{"gridcity"}},
			DNSNames:       []string{ServerName, "db-1"},
			IPAddresses:    []net.IP{net.IPv4(10, 0, 0, 1)},
			EmailAddresses: []string{"root@example.com"},
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			csr := newCSR(t, tt.key, tt.request)
			issued := time.Now()
			got, err := ca.SignAgent(csr, "web-1")
			if err != nil {
				t.Fatal(err)
			}
			c, err := x509.ParseCertificate(got.DER)
			if err != nil {
				t.Fatal(err)
			}
			if c.Subject.CommonName != "web-1" || !slices.Equal(c.Subject.Organization, []string{"gridcity agent"}) {
				t.Errorf("subject %q; want CN=web-1, O=gridcity agent", c.Subject)
			}
			if len(c.DNSNames)+len(c.IPAddresses)+len(c.EmailAddresses)+len(c.URIs) != 0 {
				t.Errorf("names %v %v %v %v; want none", c.DNSNames, c.IPAddresses, c.EmailAddresses, c.URIs)
			}
			if c.IsCA || c.KeyUsage != x509.KeyUsageDigitalSignature || !slices.Equal(c.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}) {
				t.Errorf("IsCA %v, KeyUsage %b, ExtKeyUsage %v; want a client-only leaf", c.IsCA, c.KeyUsage, c.ExtKeyUsage)
			}
			checkValidity(t, c, issued, 2*year)
			if !tt.key.Public().(interface{ Equal(crypto.PublicKey) bool }).Equal(c.PublicKey) {
				t.Error("the certificate is not for the request's key")
			}
			if got.Serial != SerialHex(c.SerialNumber) || got.Serial == "" {
				t.Errorf("serial %q; want the certificate's %s", got.Serial, SerialHex(c.SerialNumber))
			}
			if sum := sha256.Sum256(c.RawSubjectPublicKeyInfo); !bytes.Equal(got.KeySHA256, sum[:]) {
				t.Errorf("KeySHA256 %x; want the sha256 of the key %x", got.KeySHA256, sum)
			}
			if _, err := c.Verify(x509.VerifyOptions{Roots: ca.Pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
				t.Errorf("verify as a client: %v", err)
			}
			if _, err := c.Verify(x509.VerifyOptions{Roots: ca.Pool(), DNSName: ServerName}); err == nil {
				t.Error("an agent's certificate verifies as the coordinator's")
			}
			var unknown x509.UnknownAuthorityError
			if _, err := c.Verify(x509.VerifyOptions{Roots: other.Pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); !errors.As(err, &unknown) {
				t.Errorf("verify against another CA: %v; want an unknown authority", err)
			}
		})
	}
}

// The key of an agent's certificate says which agent it is: the same key
// asking again has the same KeySHA256, another key another.
func TestSignAgentKeySHA256(t *testing.T) {
	ca := newCA(t)
	key := newKey(t)
	sign := func(key crypto.Signer) AgentCert {
		t.Helper()
		c, err := ca.SignAgent(newCSR(t, key, nil), "web-1")
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	first, again, other := sign(key), sign(key), sign(newKey(t))
	if !bytes.Equal(first.KeySHA256, again.KeySHA256) || first.Serial == again.Serial {
		t.Errorf("the same key twice: keys %x %x, serials %s %s; want one key, two serials", first.KeySHA256, again.KeySHA256, first.Serial, again.Serial)
	}
	if bytes.Equal(first.KeySHA256, other.KeySHA256) {
		t.Error("two keys have the same KeySHA256")
	}
}

func TestSignAgentRefuses(t *testing.T) {
	ca := newCA(t)
	good := newCSR(t, newKey(t), nil)
	tampered := slices.Clone(good)
	tampered[len(tampered)-1] ^= 0xff // the signature's last byte
	for _, tt := range []struct {
		name string
		csr  []byte
		srv  string
		want string
	}{
		{"no request", nil, "web-1", "certificate request is not valid DER PKCS#10"},
		{"not DER", []byte("-----BEGIN CERTIFICATE REQUEST-----"), "web-1", "certificate request is not valid DER PKCS#10"},
		{"truncated", good[:len(good)/2], "web-1", "certificate request is not valid DER PKCS#10"},
		{"a certificate, not a request", ca.Cert().Raw, "web-1", "certificate request is not valid DER PKCS#10"},
		{"signature does not match", tampered, "web-1", "certificate request signature"},
		{"empty name", good, "", `server name "" must be 1 to 63 characters`},
		{"name with a slash", good, "web/1", `server name "web/1" has '/' at position 4`},
		{"name too long", good, strings.Repeat("a", 64), "must be 1 to 63 characters"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ca.SignAgent(tt.csr, tt.srv)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v; want an error with %q", err, tt.want)
			}
			if got.DER != nil || got.Serial != "" || got.KeySHA256 != nil {
				t.Errorf("issued %+v with the error", got)
			}
		})
	}
}

// An agent's certificate cannot vouch for another: only the CA signs.
func TestAgentCannotIssue(t *testing.T) {
	ca := newCA(t)
	key := newKey(t)
	issued, err := ca.SignAgent(newCSR(t, key, nil), "web-1")
	if err != nil {
		t.Fatal(err)
	}
	agent, _ := x509.ParseCertificate(issued.DER)
	forgedKey := newKey(t)
	forged, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: big.NewInt(7),
		Subject:      pkix.Name{CommonName: ServerName},
		DNSNames:     []string{ServerName},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, agent, &forgedKey.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(forged)
	inter := x509.NewCertPool()
	inter.AddCert(agent)
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: ca.Pool(), Intermediates: inter, DNSName: ServerName}); err == nil {
		t.Fatal("a certificate signed by an agent's key verifies as the coordinator's")
	}
}

// The certificates work as the coordinator and agents use them: mutual
// TLS 1.3, the server asking for the client's certificate, the client
// checking the server's name against the CA.
func TestMutualTLS(t *testing.T) {
	ca, other := newCA(t), newCA(t)
	serverCert, err := ca.ServerCertificate()
	if err != nil {
		t.Fatal(err)
	}
	clientCert := func(ca *CA, name string) tls.Certificate {
		key := newKey(t)
		c, err := ca.SignAgent(newCSR(t, key, nil), name)
		if err != nil {
			t.Fatal(err)
		}
		return tls.Certificate{Certificate: [][]byte{c.DER}, PrivateKey: key}
	}
	for _, tt := range []struct {
		name      string
		client    tls.Certificate
		roots     *x509.CertPool
		refusedBy string // "server", "client", or "" for a handshake that succeeds
	}{
		{"agent of this CA", clientCert(ca, "web-1"), ca.Pool(), ""},
		{"agent of another CA", clientCert(other, "web-1"), ca.Pool(), "server"},
		{"agent trusting another CA", clientCert(ca, "web-1"), other.Pool(), "client"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cc, sc := net.Pipe()
			srv := tls.Server(sc, &tls.Config{Certificates: []tls.Certificate{serverCert}, ClientAuth: tls.VerifyClientCertIfGiven, ClientCAs: ca.Pool(), MinVersion: tls.VersionTLS13})
			cli := tls.Client(cc, &tls.Config{Certificates: []tls.Certificate{tt.client}, RootCAs: tt.roots, ServerName: gridcityv1.CoordinatorServerName, MinVersion: tls.VersionTLS13})
			srvErr := make(chan error, 1)
			go func() {
				srvErr <- srv.Handshake()
				srv.Close()
			}()
			cliErr := cli.Handshake()
			if cliErr == nil {
				// In TLS 1.3 the server checks the client's certificate
				// after the client is done: a read tells its verdict.
				_, cliErr = cli.Read(make([]byte, 1))
			}
			cli.Close()
			err := <-srvErr
			var verr *tls.CertificateVerificationError
			switch tt.refusedBy {
			case "server":
				if !errors.As(err, &verr) {
					t.Fatalf("server handshake: %v; want the client's certificate refused", err)
				}
				return
			case "client":
				if !errors.As(cliErr, &verr) {
					t.Fatalf("client handshake: %v; want the server's certificate refused", cliErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("server handshake: %v (client: %v)", err, cliErr)
			}
			// What agentapi's authenticate reads: the name and the serial.
			chains := srv.ConnectionState().VerifiedChains
			if len(chains) == 0 || chains[0][0].Subject.CommonName != "web-1" {
				t.Fatalf("verified chains %v; want web-1's", chains)
			}
			if !bytes.Equal(chains[0][len(chains[0])-1].Raw, ca.Cert().Raw) {
				t.Error("the chain does not end at the CA")
			}
		})
	}
}

// Serials are unique, positive and fit RFC 5280's 20 octets, across
// every kind of certificate the CA issues.
func TestSerialsAreUnique(t *testing.T) {
	ca := newCA(t)
	seen := map[string]bool{SerialHex(ca.Cert().SerialNumber): true}
	add := func(n *big.Int) {
		t.Helper()
		s := SerialHex(n)
		if n.Sign() <= 0 || len(n.Bytes()) > 20 {
			t.Fatalf("serial %s out of range", s)
		}
		if seen[s] {
			t.Fatalf("serial %s issued twice", s)
		}
		seen[s] = true
	}
	csr := newCSR(t, newKey(t), nil)
	for range 200 {
		c, err := ca.SignAgent(csr, "web-1")
		if err != nil {
			t.Fatal(err)
		}
		parsed, _ := x509.ParseCertificate(c.DER)
		add(parsed.SerialNumber)
	}
	for range 20 {
		c, err := ca.ServerCertificate()
		if err != nil {
			t.Fatal(err)
		}
		leaf, _ := x509.ParseCertificate(c.Certificate[0])
		add(leaf.SerialNumber)
	}
}

func TestSerialHex(t *testing.T) {
	two127, _ := new(big.Int).SetString("80000000000000000000000000000000", 16)
	for _, tt := range []struct {
		n    *big.Int
		want string
	}{
		{big.NewInt(1), "01"},
		{big.NewInt(0xabc), "0abc"},
		{big.NewInt(0x1234), "1234"},
		{two127, "80000000000000000000000000000000"},
	} {
		if got := SerialHex(tt.n); got != tt.want {
			t.Errorf("SerialHex(%v) = %q; want %q", tt.n, got, tt.want)
		}
	}
}

func TestValidName(t *testing.T) {
	for _, tt := range []struct {
		name string
		want string // "" for valid
	}{
		{"web-1", ""},
		{"a", ""},
		{"9", ""},
		{"DB_2.lekhix", ""},
		{strings.Repeat("a", 63), ""},
		{"", `server name "" must be 1 to 63 characters`},
		{strings.Repeat("a", 64), "must be 1 to 63 characters"},
		{"-web", `has '-' at position 1`},
		{"_web", `has '_' at position 1`},
		{".web", `has '.' at position 1`},
		{"web 1", `has ' ' at position 4`},
		{"web/1", `has '/' at position 4`},
		{"web:1", `has ':' at position 4`},
		{"web\n1", `has '\n' at position 4`},
		{"web\x001", `has '\x00' at position 4`},
		{"wéb", `has 'é' at position 2`},
		{"web١", `has '١' at position 4`}, // an Arabic-Indic digit
		{"../etc", `has '.' at position 1`},
	} {
		err := ValidName(tt.name)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("ValidName(%q) = %v; want valid", tt.name, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("ValidName(%q) = %v; want an error with %q", tt.name, err, tt.want)
		}
	}
}

// The CSR comes from the network at enrollment, before anything about the
// agent is known.
func FuzzSignAgent(f *testing.F) {
	ca := newCA(f)
	good := newCSR(f, newKey(f), nil)
	f.Add(good, "web-1")
	f.Add(good[:len(good)-3], "web-1")
	f.Add([]byte{0x30, 0x82, 0xff, 0xff}, "a")
	f.Add(ca.Cert().Raw, "web-1")
	f.Add([]byte{}, "")
	f.Fuzz(func(t *testing.T, csr []byte, name string) {
		got, err := ca.SignAgent(csr, name)
		if err != nil {
			if got.DER != nil || err.Error() == "" {
				t.Fatalf("issued %d bytes with error %q", len(got.DER), err)
			}
			return
		}
		if ValidName(name) != nil {
			t.Fatalf("issued for the invalid name %q", name)
		}
		c, err := x509.ParseCertificate(got.DER)
		if err != nil {
			t.Fatal(err)
		}
		if c.Subject.CommonName != name || c.IsCA || len(c.DNSNames)+len(c.IPAddresses)+len(c.EmailAddresses)+len(c.URIs) != 0 {
			t.Fatalf("issued %q IsCA %v names %v %v %v %v", c.Subject, c.IsCA, c.DNSNames, c.IPAddresses, c.EmailAddresses, c.URIs)
		}
		if _, err := c.Verify(x509.VerifyOptions{Roots: ca.Pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
			t.Fatal(err)
		}
		if sum := sha256.Sum256(c.RawSubjectPublicKeyInfo); !bytes.Equal(got.KeySHA256, sum[:]) || got.Serial != SerialHex(c.SerialNumber) {
			t.Fatalf("KeySHA256 %x serial %s for a certificate of key %x serial %s", got.KeySHA256, got.Serial, sum, SerialHex(c.SerialNumber))
		}
	})
}

// The stored CA is read at every start; whatever the bytes, the load
// gives a CA or an error, never a half.
func FuzzLoadStoredCA(f *testing.F) {
	st := newMemStore()
	load(f, st)
	blob := st.blobs["ca.pem"]
	f.Add(blob)
	f.Add(blob[:len(blob)/2])
	f.Add([]byte("-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		st := newMemStore()
		st.blobs["ca.pem"] = b
		ca, err := loadWith(st)
		if (ca == nil) == (err == nil) {
			t.Fatalf("got %v, %v; want a CA or an error", ca, err)
		}
		if err != nil {
			return
		}
		if ca.Cert() == nil || gridcityv1.CheckPin(ca.Pin()) != nil || st.puts != 0 {
			t.Fatalf("loaded a CA without a certificate or pin, or wrote over the stored one")
		}
	})
}
