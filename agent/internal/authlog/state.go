package authlog

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/gridcity/gridcity/lib/atomicfile"
)

const (
	// stateFileName is the Follower's file in the state directory.
	stateFileName = "authlog.json"
	stateVersion  = 1
	// maxStateSize bounds the state file read back; the bounds of the
	// aggregate keep a real one well under it.
	maxStateSize = 64 << 20
)

// stateFile is what survives a restart: how far each log was read and the
// aggregate as it was then, saved together so that they always agree.
type stateFile struct {
	Version   int            `json:"version"`
	SavedAt   int64          `json:"savedAt"`
	Files     []*fileState   `json:"files,omitempty"`
	Journal   journalState   `json:"journal,omitzero"`
	Aggregate savedAggregate `json:"aggregate"`
}

// load reads the state file once, at the first Poll. A missing file is a
// first start; an unreadable or damaged one is logged and treated as one.
func (f *Follower) load() {
	if f.cfg.StateDir == "" {
		return
	}
	path := filepath.Join(f.cfg.StateDir, stateFileName)
	b, err := readBounded(path, maxStateSize)
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	if err == nil {
		err = f.restore(b)
	}
	if err != nil {
		f.logger.Warn("the SSH log state cannot be used; starting over as on a first start", "path", path, "err", err)
		return
	}
	f.savedVersion = f.agg.Version()
}

func readBounded(path string, limit int64) ([]byte, error) {
	file, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	b, err := io.ReadAll(io.LimitReader(file, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("larger than %d MiB", limit>>20)
	}
	return b, nil
}

// restore takes over a saved state after checking it.
func (f *Follower) restore(b []byte) error {
	var sf stateFile
	if err := json.Unmarshal(b, &sf); err != nil {
		return err
	}
	if sf.Version != stateVersion {
		return fmt.Errorf("version %d; want %d", sf.Version, stateVersion)
	}
	agg, err := loadAggregate(sf.Aggregate)
	if err != nil {
		return err
	}
	files := map[string]*fileState{}
	for _, st := range sf.Files {
		if st == nil || st.Offset < 0 || files[st.Path] != nil {
			return errors.New("a file's position is invalid or twice")
		}
		if p := st.Prev; p != nil && (p.Offset < 0 || p.Prev != nil || p.Path == "") {
			return fmt.Errorf("%s: invalid rotated file", st.Path)
		}
		if slices.Contains(f.cfg.Files, st.Path) {
			files[st.Path] = st // a log no longer configured is forgotten
		}
	}
	f.agg, f.files, f.journal, f.fresh = agg, files, sf.Journal, false
	return nil
}

// save writes the state when it changed and the last write is at least
// saveEvery old: a temporary file, fsync, rename over the old one, fsync of
// the directory. A crash leaves the old state or the new one, and either
// agrees with itself: the lines after its offsets are counted again, once.
func (f *Follower) save(now time.Time) error {
	if f.cfg.StateDir == "" || !f.dirty && f.savedVersion == f.agg.Version() {
		return nil
	}
	if !f.savedAt.IsZero() && now.Sub(f.savedAt) < saveEvery {
		return nil
	}
	sf := stateFile{Version: stateVersion, SavedAt: now.Unix(), Journal: f.journal, Aggregate: f.agg.save()}
	for _, st := range f.files {
		sf.Files = append(sf.Files, st)
	}
	slices.SortFunc(sf.Files, func(a, b *fileState) int { return cmp.Compare(a.Path, b.Path) })
	raw, err := json.Marshal(sf)
	if err != nil {
		return fmt.Errorf("encode: %w", err)
	}
	if err := atomicfile.Write(f.cfg.StateDir, stateFileName, raw); err != nil {
		return err
	}
	f.dirty, f.savedAt, f.savedVersion = false, now, f.agg.Version()
	return nil
}
