//go:build unix

package review

import (
	"io/fs"
	"os"
	"syscall"
)

// privateMode takes group and other permissions off an existing store file
// that uid owns (a file contractd created before its store files were
// made 0600, or a -wal/-shm left by such a run). A file of another user is
// left alone: its owner chose its mode, and contractd could not change it.
// A missing file, or one that cannot be changed, is no error: the store
// opens either way.
func privateMode(path string, uid int) {
	fi, err := os.Stat(path)
	if err != nil || !fi.Mode().IsRegular() {
		return
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || int(st.Uid) != uid || fi.Mode().Perm()&0o077 == 0 {
		return
	}
	_ = os.Chmod(path, fi.Mode().Perm()&^fs.FileMode(0o077))
}

func euid() int { return os.Geteuid() }
