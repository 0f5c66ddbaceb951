package filewatch

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func write(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// waitChange waits for a signal on C, then for quiet (the tail of the same
// change), so the next step starts from nothing pending.
func waitChange(t *testing.T, w *Watcher, what string) {
	t.Helper()
	select {
	case <-w.C:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: no change reported", what)
	}
	drain(w)
}

func drain(w *Watcher) {
	for {
		select {
		case <-w.C:
		case <-time.After(150 * time.Millisecond):
			return
		}
	}
}

func noChange(t *testing.T, w *Watcher, what string) {
	t.Helper()
	select {
	case <-w.C:
		t.Fatalf("%s: a change was reported", what)
	case <-time.After(300 * time.Millisecond):
	}
}

// TestReplacements: every way a config gets replaced is seen, one after the
// other on the same watcher, for a config and a schema file in another
// directory.
func TestReplacements(t *testing.T) {
	root := t.TempDir()
	dir, schemas := filepath.Join(root, "etc"), filepath.Join(root, "schemas")
	must(t, os.Mkdir(dir, 0o700))
	must(t, os.Mkdir(schemas, 0o700))
	cfg, schema := filepath.Join(dir, "contractd.yaml"), filepath.Join(schemas, "s.json")
	write(t, cfg, "v: 1\n")
	write(t, schema, "{}")
	w, err := New([]string{cfg, schema})
	must(t, err)
	defer w.Close()

	steps := []struct {
		name string
		do   func()
	}{
		{"write in place", func() { write(t, cfg, "v: 2\n") }},
		{"append in place", func() {
			f, err := os.OpenFile(cfg, os.O_WRONLY|os.O_APPEND, 0)
			must(t, err)
			_, _ = f.WriteString("# more\n")
			must(t, f.Close())
		}},
		{"atomic rename over", func() {
			write(t, filepath.Join(dir, ".contractd.yaml.tmp"), "v: 3\n")
			must(t, os.Rename(filepath.Join(dir, ".contractd.yaml.tmp"), cfg))
		}},
		{"write after the rename (the new inode is watched)", func() { write(t, cfg, "v: 4\n") }},
		{"remove", func() { must(t, os.Remove(cfg)) }},
		{"create again", func() { write(t, cfg, "v: 5\n") }},
		{"backup rename and new file (vim)", func() {
			must(t, os.Rename(cfg, cfg+"~"))
			write(t, cfg, "v: 6\n")
			must(t, os.Remove(cfg+"~"))
		}},
		{"symlink swapped in", func() {
			write(t, filepath.Join(dir, "real-7.yaml"), "v: 7\n")
			must(t, os.Symlink("real-7.yaml", filepath.Join(dir, "link.tmp")))
			must(t, os.Rename(filepath.Join(dir, "link.tmp"), cfg))
		}},
		{"symlink retargeted (the old target stays)", func() {
			write(t, filepath.Join(dir, "real-8.yaml"), "v: 8\n")
			must(t, os.Symlink("real-8.yaml", filepath.Join(dir, "link.tmp")))
			must(t, os.Rename(filepath.Join(dir, "link.tmp"), cfg))
		}},
		{"the current target written", func() { write(t, filepath.Join(dir, "real-8.yaml"), "v: 9\n") }},
		{"schema in another directory", func() { write(t, schema, `{"type":"object"}`) }},
		{"schema replaced by rename", func() {
			write(t, filepath.Join(schemas, "s.json.new"), `{"type":"array"}`)
			must(t, os.Rename(filepath.Join(schemas, "s.json.new"), schema))
		}},
	}
	for _, s := range steps {
		s.do()
		waitChange(t, w, s.name)
	}
	// The old symlink target is no longer the config: writing it is no change.
	write(t, filepath.Join(dir, "real-7.yaml"), "v: old\n")
	noChange(t, w, "the former symlink target")
}

// TestConfigMap: a Kubernetes ConfigMap volume (name -> ..data/name, ..data
// -> ..<timestamp>), updated the way the kubelet does it.
func TestConfigMap(t *testing.T) {
	dir := t.TempDir()
	version := func(n int) string {
		ts := fmt.Sprintf("..2026_11_25_03_%02d_00.%d", n, n)
		must(t, os.Mkdir(filepath.Join(dir, ts), 0o755))
		write(t, filepath.Join(dir, ts, "contractd.yaml"), fmt.Sprintf("v: %d\n", n))
		return ts
	}
	old := version(1)
	must(t, os.Symlink(old, filepath.Join(dir, "..data")))
	cfg := filepath.Join(dir, "contractd.yaml")
	must(t, os.Symlink(filepath.Join("..data", "contractd.yaml"), cfg))
	w, err := New([]string{cfg})
	must(t, err)
	defer w.Close()
	updateConfigMap(t, w, dir, old, version, cfg, func(n int) string { return fmt.Sprintf("v: %d\n", n) })
}

// TestUnrelatedFiles: a thousand other files written in the config's
// directory, and a log appended to beside it, report no change.
func TestUnrelatedFiles(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "contractd.yaml")
	write(t, cfg, "v: 1\n")
	w, err := New([]string{cfg})
	must(t, err)
	defer w.Close()
	for i := range 1000 {
		write(t, filepath.Join(dir, fmt.Sprintf("other-%04d.json", i)), `{"n":1}`)
	}
	log, err := os.OpenFile(filepath.Join(dir, "contractd.log"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	must(t, err)
	defer log.Close()
	for range 1000 {
		_, _ = log.WriteString(`{"level":"INFO","msg":"request"}` + "\n")
	}
	noChange(t, w, "unrelated files")
	if n := w.Changes.Load(); n != 0 {
		t.Fatalf("%d changes counted for unrelated files", n)
	}
	// Still watching.
	write(t, cfg, "v: 2\n")
	waitChange(t, w, "the config after the unrelated files")
}

// TestDirectoryCreatedLater: a file in a directory that does not exist
// when it is set to be watched (a schema a new config names before the
// deploy creates its directory) is seen once the directories and the file
// appear; a directory removed and created again is followed too.
func TestDirectoryCreatedLater(t *testing.T) {
	root := t.TempDir()
	cfg := filepath.Join(root, "contractd.yaml")
	write(t, cfg, "v: 1\n")
	schema := filepath.Join(root, "schemas", "v2", "s.json")
	w, err := New([]string{cfg, schema})
	must(t, err)
	defer w.Close()

	must(t, os.MkdirAll(filepath.Dir(schema), 0o700))
	write(t, schema, "{}")
	waitChange(t, w, "the directories and the file created")
	write(t, schema, `{"type":"object"}`)
	waitChange(t, w, "the new file written")

	must(t, os.RemoveAll(filepath.Join(root, "schemas")))
	waitChange(t, w, "the directory removed")
	must(t, os.MkdirAll(filepath.Dir(schema), 0o700))
	drain(w)
	write(t, schema, `{"type":"array"}`)
	waitChange(t, w, "the file created in the directory created again")
	write(t, filepath.Join(filepath.Dir(schema), "other.json"), "{}")
	noChange(t, w, "another file in the directory created again")
}

// TestDirectorySymlinkSwapped: the config's directory is a symlink that a
// release swaps (current -> releases/N, replaced by a rename): the new
// release's config is a change, and is watched from then on.
func TestDirectorySymlinkSwapped(t *testing.T) {
	root := t.TempDir()
	release := func(n int) string {
		d := filepath.Join(root, "releases", fmt.Sprint(n))
		must(t, os.MkdirAll(d, 0o700))
		write(t, filepath.Join(d, "contractd.yaml"), fmt.Sprintf("v: %d\n", n))
		return d
	}
	must(t, os.Symlink(release(1), filepath.Join(root, "current")))
	cfg := filepath.Join(root, "current", "contractd.yaml")
	w, err := New([]string{cfg})
	must(t, err)
	defer w.Close()
	for n := 2; n <= 3; n++ {
		must(t, os.Symlink(release(n), filepath.Join(root, "current.tmp")))
		drain(w) // creating the release is no change yet
		must(t, os.Rename(filepath.Join(root, "current.tmp"), filepath.Join(root, "current")))
		waitChange(t, w, fmt.Sprintf("release %d swapped in", n))
		write(t, cfg, fmt.Sprintf("v: %d.1\n", n))
		waitChange(t, w, fmt.Sprintf("release %d's config written", n))
	}
	write(t, filepath.Join(root, "releases", "1", "contractd.yaml"), "v: old\n")
	noChange(t, w, "the first release's config, swapped out")
}

// TestConfigMapSubdirectory: a ConfigMap whose items include a schema in
// a subdirectory (contracts -> ..data/contracts, the kubelet's layout for
// an item path with a slash): updates that change only the schema are
// seen, update after update.
func TestConfigMapSubdirectory(t *testing.T) {
	dir := t.TempDir()
	version := func(n int) string {
		ts := fmt.Sprintf("..2026_11_28_16_%02d_00.%d", n, n)
		must(t, os.MkdirAll(filepath.Join(dir, ts, "contracts"), 0o755))
		write(t, filepath.Join(dir, ts, "contractd.yaml"), "v: 1\n")
		write(t, filepath.Join(dir, ts, "contracts", "s.json"), fmt.Sprintf(`{"v":%d}`, n))
		return ts
	}
	old := version(1)
	must(t, os.Symlink(old, filepath.Join(dir, "..data")))
	must(t, os.Symlink(filepath.Join("..data", "contractd.yaml"), filepath.Join(dir, "contractd.yaml")))
	must(t, os.Symlink(filepath.Join("..data", "contracts"), filepath.Join(dir, "contracts")))
	schema := filepath.Join(dir, "contracts", "s.json")
	w, err := New([]string{filepath.Join(dir, "contractd.yaml"), schema})
	must(t, err)
	defer w.Close()
	updateConfigMap(t, w, dir, old, version, schema, func(n int) string { return fmt.Sprintf(`{"v":%d}`, n) })
}

// updateConfigMap updates the ConfigMap volume in dir, at its timestamped
// directory old, to versions 2, 3 and 4 (version(n) writes each and names
// its directory): each update is a change w reports, after which file
// reads want(n).
func updateConfigMap(t *testing.T, w *Watcher, dir, old string, version func(n int) string, file string, want func(n int) string) {
	t.Helper()
	for n := 2; n <= 4; n++ {
		ts := version(n)
		swapConfigMap(t, dir, old, ts)
		old = ts
		waitChange(t, w, fmt.Sprintf("ConfigMap update %d", n))
		b, err := os.ReadFile(file)
		must(t, err)
		if string(b) != want(n) {
			t.Fatalf("%s reads %q after update %d", filepath.Base(file), b, n)
		}
	}
}

// swapConfigMap updates a ConfigMap volume in dir the way the kubelet does:
// ..data, a symlink to the timestamped directory old, is atomically
// replaced by one to next, and old is removed.
func swapConfigMap(t *testing.T, dir, old, next string) {
	t.Helper()
	must(t, os.Symlink(next, filepath.Join(dir, "..data_tmp")))
	must(t, os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")))
	must(t, os.RemoveAll(filepath.Join(dir, old)))
}
