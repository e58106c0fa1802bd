package collect

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"golang.org/x/sys/unix"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
)

// maxFDWalk bounds the descriptors one owner search looks at, so that a
// host with millions of open files costs a bounded pause, not a stall.
const maxFDWalk = 1 << 21

type socketTable struct {
	path, proto string
	udp         bool
	// optional tables are missing when IPv6 is disabled, which is no gap.
	optional bool
}

// socketsCollector reads the socket tables every sample but looks for the
// processes behind listeners, which means reading the descriptors of every
// process, only when a listener appears that it has not looked for before,
// as tailscale's portlist does.
type socketsCollector struct {
	procRoot  string
	tables    []socketTable
	sockstats []string
	sc        *lineScanner
	tally     sockTally
	inuse     map[string]uint64

	// owners maps the inode of every current listener to its process.
	owners map[uint64]owner
	// denied is how many processes' descriptors the last search could not
	// read.
	denied int
	// linkBuf is reused for readlink.
	linkBuf []byte
}

func newSocketsCollector(cfg Config, _ *slog.Logger) collector {
	table := func(name string, udp, optional bool) socketTable {
		return socketTable{path: filepath.Join(cfg.ProcRoot, "net", name), proto: name, udp: udp, optional: optional}
	}
	return &socketsCollector{
		procRoot:  cfg.ProcRoot,
		tables:    []socketTable{table("tcp", false, false), table("tcp6", false, true), table("udp", true, false), table("udp6", true, true)},
		sockstats: []string{filepath.Join(cfg.ProcRoot, "net", "sockstat"), filepath.Join(cfg.ProcRoot, "net", "sockstat6")},
		sc:        newLineScanner(64 << 10),
		inuse:     map[string]uint64{},
		owners:    map[uint64]owner{},
		linkBuf:   make([]byte, 64),
	}
}

func (c *socketsCollector) update(ctx context.Context, out *gridcityv1.StateUpdate, n *notes) error {
	c.tally.reset()
	// A missing sockstat (an old or trimmed kernel) only means every
	// table is read.
	clear(c.inuse)
	for _, path := range c.sockstats {
		_ = scanFile(c.sc, path, maxMeminfoLines, func(s *lineScanner) error {
			parseSockstat(s.lines(), c.inuse)
			return nil
		})
	}
	for _, tb := range c.tables {
		if n, known := c.inuse[tb.proto]; known && n == 0 {
			continue
		}
		err := scanFile(c.sc, tb.path, maxSocketLines, func(s *lineScanner) error {
			parseSockets(s.lines(), binary.NativeEndian, func(sk socket) { c.tally.add(tb.proto, tb.udp, sk) })
			return nil
		})
		switch {
		case err == nil:
		case errors.Is(err, errLineLimit):
			n.add(tb.proto, fmt.Sprintf("%s has more than %d sockets; the rest were not read", tb.path, maxSocketLines))
		case tb.optional && errors.Is(err, fs.ErrNotExist):
		default:
			return err
		}
	}
	c.resolveOwners(ctx)
	if unknown := c.unknownOwners(); unknown > 0 && c.denied > 0 {
		n.add("owners", fmt.Sprintf("no process shown for %d listening sockets: the descriptors of %d processes could not be read (permission denied; the agent needs root or CAP_SYS_PTRACE)", unknown, c.denied))
	}
	out.Listeners = c.tally.listeners(c.owners)
	out.Connections = c.tally.connections()
	return nil
}

// resolveOwners brings the owner cache up to date with the current
// listeners: it forgets sockets that closed, and searches the processes'
// descriptors once if any listener is new.
func (c *socketsCollector) resolveOwners(ctx context.Context) {
	current := make(map[uint64]bool, len(c.tally.listen))
	wanted := map[uint64]bool{}
	c.tally.listenerInodes(func(inode uint64) {
		current[inode] = true
		if _, known := c.owners[inode]; !known {
			wanted[inode] = true
		}
	})
	for inode := range c.owners {
		if !current[inode] {
			delete(c.owners, inode)
		}
	}
	if len(wanted) == 0 {
		return
	}
	c.denied = c.walk(ctx, wanted)
	// Sockets no process was found for (kernel sockets, other pid
	// namespaces, unreadable processes) are remembered as unknown, so they
	// do not cause a search every sample.
	for inode := range wanted {
		if _, found := c.owners[inode]; !found {
			c.owners[inode] = owner{}
		}
	}
}

// walk reads /proc/[pid]/fd of every process until every wanted inode is
// found, records their owners, and returns how many processes' descriptors
// it could not read.
func (c *socketsCollector) walk(ctx context.Context, wanted map[uint64]bool) (denied int) {
	names, err := readDirNames(c.procRoot)
	if err != nil {
		return 0
	}
	// In pid order, so that a socket shared by a parent and its workers
	// (nginx, postgres) is credited to the parent.
	pids := make([]int32, 0, len(names))
	for _, name := range names {
		if pid, err := strconv.ParseInt(name, 10, 32); err == nil && pid > 0 {
			pids = append(pids, int32(pid))
		}
	}
	slices.Sort(pids)
	left, budget := len(wanted), maxFDWalk
	for _, pid := range pids {
		if left == 0 || budget <= 0 || ctx.Err() != nil {
			return denied
		}
		name := strconv.Itoa(int(pid))
		fdDir := filepath.Join(c.procRoot, name, "fd")
		fds, err := readDirNames(fdDir)
		if errors.Is(err, fs.ErrPermission) {
			denied++
		}
		comm := ""
		for _, fd := range fds {
			if budget--; budget < 0 {
				break
			}
			inode, ok := c.socketInode(filepath.Join(fdDir, fd))
			if !ok || !wanted[inode] {
				continue
			}
			if _, done := c.owners[inode]; done {
				continue // shared with a lower pid, which keeps it
			}
			if comm == "" {
				comm = readComm(filepath.Join(c.procRoot, name, "comm"))
			}
			c.owners[inode] = owner{pid: pid, comm: comm}
			left--
		}
	}
	return denied
}

// socketInode reads one descriptor link, reusing the collector's buffer.
func (c *socketsCollector) socketInode(path string) (uint64, bool) {
	n, err := unix.Readlink(path, c.linkBuf)
	if err != nil || n >= len(c.linkBuf) {
		return 0, false // a socket link is short; a longer one is a file
	}
	return parseSocketLink(c.linkBuf[:n])
}

// unknownOwners counts current listeners whose process is not known.
func (c *socketsCollector) unknownOwners() int {
	n := 0
	c.tally.listenerInodes(func(inode uint64) {
		if c.owners[inode].pid == 0 {
			n++
		}
	})
	return n
}

func readDirNames(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdirnames(-1)
}

// readComm reads a process's name, "" when it is gone.
func readComm(path string) string {
	f, err := openProc(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	var buf [64]byte
	n, _ := f.Read(buf[:])
	return cleanBytes(bytes.TrimRight(buf[:n], "\n"), maxName)
}
