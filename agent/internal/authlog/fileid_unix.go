//go:build unix

package authlog

import (
	"os"
	"syscall"
)

// fileID is what tells one file from the next at the same path: a rotation
// makes a new inode.
func fileID(fi os.FileInfo) (dev, ino uint64) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Dev), uint64(st.Ino)
	}
	return 0, 0
}
