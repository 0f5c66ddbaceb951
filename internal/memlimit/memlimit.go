// Package memlimit finds the memory limit of the cgroup the process runs
// in (v2 memory.max, or v1 memory.limit_in_bytes), for server.memory_limit:
// auto. Reading two small files needs no library.
package memlimit

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// unlimited: cgroup v1 writes "no limit" as a page-rounded 2^63-1.
const unlimited = 1 << 62

// Cgroup returns the smallest memory limit set on the process's cgroup or
// any of its ancestors, 0 when there is none (or no cgroup is found). root
// is the filesystem root the /proc and /sys paths are read under ("/").
func Cgroup(root string) int64 {
	f, err := os.Open(filepath.Join(root, "proc/self/cgroup"))
	if err != nil {
		return 0
	}
	defer f.Close()
	best := int64(0)
	take := func(v int64) {
		if v > 0 && v < unlimited && (best == 0 || v < best) {
			best = v
		}
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// hierarchy-ID:controller-list:cgroup-path
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "": // v2
			walk(filepath.Join(root, "sys/fs/cgroup"), parts[2], "memory.max", take)
		case hasController(parts[1], "memory"): // v1
			walk(filepath.Join(root, "sys/fs/cgroup/memory"), parts[2], "memory.limit_in_bytes", take)
		}
	}
	return best
}

func hasController(list, name string) bool {
	for _, c := range strings.Split(list, ",") {
		if c == name {
			return true
		}
	}
	return false
}

// walk reads file in mount/path and each parent up to mount. Inside a
// container the mount's root is often the container's own cgroup, so the
// path from /proc/self/cgroup may not exist below it: the mount's own
// file counts then.
func walk(mount, path, file string, take func(int64)) {
	p := filepath.Clean("/" + path)
	for {
		if v, ok := readLimit(filepath.Join(mount, p, file)); ok {
			take(v)
		}
		if p == "/" {
			return
		}
		p = filepath.Dir(p)
	}
}

func readLimit(path string) (int64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	s := strings.TrimSpace(string(b))
	if s == "max" {
		return 0, false
	}
	v, err := strconv.ParseInt(s, 10, 64)
	return v, err == nil
}
