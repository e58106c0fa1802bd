package collect

import (
	"fmt"
	"io"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// procFile reads a procfs file through a raw descriptor: an *os.File would
// allocate and register with the poller on every open, and the fast tier
// opens three files every five seconds on every server.
type procFile struct {
	fd int
}

// openProc opens path for reading. The error is an *fs.PathError, so its
// text names the file ("open /proc/stat: permission denied").
func openProc(path string) (procFile, error) {
	for {
		fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return procFile{fd: -1}, &fs.PathError{Op: "open", Path: path, Err: err}
		}
		return procFile{fd: fd}, nil
	}
}

func (f procFile) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	for {
		n, err := unix.Read(f.fd, p)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, os.NewSyscallError("read", err)
		}
		if n == 0 {
			return 0, io.EOF
		}
		return n, nil
	}
}

func (f procFile) Close() error { return unix.Close(f.fd) }

// scanFile runs parse over the lines of path with sc, and wraps any error
// with the path.
func scanFile(sc *lineScanner, path string, maxLines int, parse func(*lineScanner) error) error {
	f, err := openProc(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc.reset(f, maxLines)
	err = parse(sc)
	readErr := sc.err
	sc.reset(nil, 0) // drop the reference to the closed descriptor
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if readErr != nil {
		return fmt.Errorf("read %s: %w", path, readErr)
	}
	return nil
}
