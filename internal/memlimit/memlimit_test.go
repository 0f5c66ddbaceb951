package memlimit

import (
	"os"
	"path/filepath"
	"testing"
)

func write(t *testing.T, root, rel, content string) {
	t.Helper()
	p := filepath.Join(root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestCgroup(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		want  int64
	}{
		{"v2 limit", map[string]string{"proc/self/cgroup": "0::/kubepods/pod1/c1\n",
			"sys/fs/cgroup/kubepods/pod1/c1/memory.max": "536870912\n", "sys/fs/cgroup/kubepods/memory.max": "max\n"}, 512 << 20},
		{"v2 parent smaller", map[string]string{"proc/self/cgroup": "0::/a/b\n",
			"sys/fs/cgroup/a/b/memory.max": "max\n", "sys/fs/cgroup/a/memory.max": "268435456\n"}, 256 << 20},
		{"v2 namespaced root", map[string]string{"proc/self/cgroup": "0::/\n", "sys/fs/cgroup/memory.max": "1073741824\n"}, 1 << 30},
		{"v2 unlimited", map[string]string{"proc/self/cgroup": "0::/a\n", "sys/fs/cgroup/a/memory.max": "max\n"}, 0},
		{"v1 limit", map[string]string{"proc/self/cgroup": "4:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n",
			"sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes": "314572800\n"}, 300 << 20},
		{"v1 unlimited", map[string]string{"proc/self/cgroup": "4:memory:/x\n",
			"sys/fs/cgroup/memory/x/memory.limit_in_bytes": "9223372036854771712\n", "sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n"}, 0},
		{"v1 path absent below the mount", map[string]string{"proc/self/cgroup": "4:memory:/process_api/abc\n",
			"sys/fs/cgroup/memory/memory.limit_in_bytes": "209715200\n"}, 200 << 20},
		{"no cgroup file", map[string]string{}, 0},
		{"garbage", map[string]string{"proc/self/cgroup": "nonsense\n0::/a\n", "sys/fs/cgroup/a/memory.max": "lots\n"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			for rel, c := range tt.files {
				write(t, root, rel, c)
			}
			if got := Cgroup(root); got != tt.want {
				t.Errorf("got %d, want %d", got, tt.want)
			}
		})
	}
}

// The real machine: whatever it finds is a plausible limit or none.
func TestCgroupHere(t *testing.T) {
	if v := Cgroup("/"); v < 0 || (v > 0 && v < 16<<20) {
		t.Errorf("implausible limit %d", v)
	}
}
