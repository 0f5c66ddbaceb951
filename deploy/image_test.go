package deploy

import (
	"bufio"
	"bytes"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/contractd/contractd/config"
	"github.com/contractd/contractd/internal/testkit"
)

// No container engine runs here (nor in CI), so the image itself is not
// built. What can be checked is: the Dockerfile's shape, and that its
// build-stage command, run as written against this checkout, yields a
// static binary that runs on an image without libc.

type dockerfile struct {
	stages []string            // FROM lines
	lines  []string            // every instruction, continuation lines joined
	final  map[string][]string // instructions of the last stage by keyword
}

func readDockerfile(t *testing.T) dockerfile {
	t.Helper()
	b, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	var d dockerfile
	var cur string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		cur += l
		if strings.HasSuffix(cur, "\\") {
			cur = strings.TrimSuffix(cur, "\\") + " "
			continue
		}
		d.lines = append(d.lines, cur)
		kw := strings.ToUpper(strings.Fields(cur)[0])
		if kw == "FROM" {
			d.stages = append(d.stages, cur)
			d.final = map[string][]string{}
		}
		d.final[kw] = append(d.final[kw], strings.TrimSpace(cur[len(kw):]))
		cur = ""
	}
	return d
}

func TestDockerfile(t *testing.T) {
	d := readDockerfile(t)
	if len(d.stages) < 2 {
		t.Fatalf("%d stages, want a build stage and a runtime stage", len(d.stages))
	}
	base := d.final["FROM"][0]
	if !strings.Contains(base, "distroless/static") && base != "scratch" {
		t.Errorf("runtime base %q: want distroless/static or scratch (no shell, no libc)", base)
	}
	for _, l := range d.lines {
		if strings.HasPrefix(strings.ToUpper(l), "HEALTHCHECK") {
			t.Error("HEALTHCHECK present: the orchestrator's probes do that")
		}
	}
	user := d.final["USER"]
	if len(user) != 1 || !regexp.MustCompile(`^[1-9][0-9]*(:[1-9][0-9]*)?$`).MatchString(user[0]) {
		t.Errorf("USER %v: want a numeric non-root user (runAsNonRoot can only check a number)", user)
	}
	if ep := d.final["ENTRYPOINT"]; len(ep) != 1 || ep[0] != `["/contractd"]` {
		t.Errorf("ENTRYPOINT %v", ep)
	}
	if cmd := d.final["CMD"]; len(cmd) != 1 || cmd[0] != `["serve"]` {
		t.Errorf("CMD %v", cmd)
	}
	// The exposed ports are the ones the Kubernetes config listens on.
	if exp := d.final["EXPOSE"]; len(exp) != 1 || exp[0] != "8080 9090" {
		t.Errorf("EXPOSE %v, want 8080 9090 (deploy/kubernetes/base/contractd.yaml)", exp)
	}
	checkImageState(t, d)
	bin := buildAsDockerfile(t)
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the binary has an ELF interpreter: it is dynamically linked and will not run on distroless/static")
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("the binary needs shared libraries %v", libs)
	}
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "deploytest") {
		t.Errorf("contractd version: %v %s", err, out)
	}
}

// checkImageState: the image's user can write where contractd writes with
// the config at $CONTRACTD_CONFIG: the default review store (reviews.db) and
// its spool, both beside the config file. distroless has no shell to make a
// directory, so the final stage must COPY one in owned by USER; and the
// docs' `docker run` must mount a writable volume there (a named volume
// takes the image directory's owner), with the config file inside it.
func checkImageState(t *testing.T, d dockerfile) {
	t.Helper()
	var cfg string
	for _, e := range d.final["ENV"] {
		if v, ok := strings.CutPrefix(e, config.EnvConfig+"="); ok {
			cfg = v
		}
	}
	if !filepath.IsAbs(cfg) {
		t.Fatalf("ENV %s=%q: want an absolute path", config.EnvConfig, cfg)
	}
	t.Setenv(config.EnvConfig, cfg)
	rt, err := config.LoadBytes(config.Resolve(""), []byte("upstreams: [{name: u, base_url: 'http://upstream/v1'}]\n"+
		"routes: [{name: r, upstream: u, model: m, passthrough: true}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	state := filepath.Dir(cfg)
	for _, p := range []string{rt.Review.Path, rt.Review.SpoolPath} {
		if filepath.Dir(p) != state {
			t.Fatalf("the default review store writes %s, outside the config's directory %s", p, state)
		}
	}
	user := strings.Join(d.final["USER"], " ")
	owned := false
	for _, c := range d.final["COPY"] {
		f := strings.Fields(c)
		if len(f) >= 3 && slices.Contains(f, "--chown="+user) && strings.TrimSuffix(f[len(f)-1], "/") == state {
			owned = true
		}
	}
	if !owned {
		t.Errorf("the image has no %s owned by USER %s (no `COPY --chown=%[2]s ... %[1]s`): contractd cannot write its review store and spool there",
			state, user)
	}
	if wd := d.final["WORKDIR"]; len(wd) != 1 || wd[0] != state {
		t.Errorf("WORKDIR %v, want %s (relative paths in the config resolve against its directory anyway)", wd, state)
	}

	doc, err := os.ReadFile(filepath.Join("..", "docs", "deploy.md"))
	if err != nil {
		t.Fatal(err)
	}
	run := regexp.MustCompile(`(?m)^docker run (?:.*\\\n)*.*$`).Find(doc)
	if run == nil {
		t.Fatal("docs/deploy.md has no `docker run` line")
	}
	mounts := map[string]string{} // target -> source[:options]
	args := strings.Fields(strings.ReplaceAll(string(run), "\\\n", " "))
	for i, a := range args {
		if (a == "-v" || a == "--volume") && i+1 < len(args) {
			src, rest, _ := strings.Cut(args[i+1], ":")
			target, opts, _ := strings.Cut(rest, ":")
			mounts[target] = src + ":" + opts
		}
	}
	if m, ok := mounts[state]; !ok || strings.Contains(m, "ro") || strings.HasPrefix(m, "/") || strings.HasPrefix(m, "$") {
		t.Errorf("docs/deploy.md's docker run mounts %v: want a writable named volume at %s", mounts, state)
	}
	if _, ok := mounts[cfg]; !ok {
		t.Errorf("docs/deploy.md's docker run mounts %v: the config file is not at %s", mounts, cfg)
	}
}

var built struct {
	once sync.Once
	path string
	err  string
}

// buildAsDockerfile runs the Dockerfile's `go build` line as written
// (output path and VERSION substituted) at the repository root.
func buildAsDockerfile(t *testing.T) string {
	t.Helper()
	built.once.Do(func() {
		d := readDockerfile(t)
		var run string
		for _, l := range d.lines {
			if strings.HasPrefix(l, "RUN ") && strings.Contains(l, "go build") {
				run = strings.TrimPrefix(l, "RUN ")
			}
		}
		if run == "" || !strings.Contains(run, "CGO_ENABLED=0") || !strings.Contains(run, "-o /out/contractd") || !strings.HasSuffix(run, "./cmd/contractd") {
			built.err = "no `RUN CGO_ENABLED=0 go build ... -o /out/contractd ./cmd/contractd` in the Dockerfile: " + run
			return
		}
		dir, err := os.MkdirTemp("", "contractd-deploy-")
		if err != nil {
			built.err = err.Error()
			return
		}
		built.path = filepath.Join(dir, "contractd")
		run = strings.ReplaceAll(run, "-o /out/contractd", "-o "+built.path)
		run = strings.ReplaceAll(run, "${VERSION}", "deploytest")
		cmd := exec.Command("sh", "-c", run)
		cmd.Dir = ".."
		// The Dockerfile's ENV for the build stage.
		cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local", "GOFLAGS=-mod=mod")
		if out, err := cmd.CombinedOutput(); err != nil {
			built.err = "the Dockerfile's build command failed: " + err.Error() + "\n" + string(out)
		}
	})
	if built.err != "" {
		t.Fatal(built.err)
	}
	return built.path
}

// unit reads the systemd unit's keys: section.key -> values in order.
func unit(t *testing.T) map[string][]string {
	t.Helper()
	b, err := os.ReadFile("systemd/contractd.service")
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string][]string{}
	section := ""
	for _, l := range strings.Split(string(b), "\n") {
		l = strings.TrimSpace(l)
		switch {
		case l == "" || strings.HasPrefix(l, "#"):
		case strings.HasPrefix(l, "["):
			section = strings.Trim(l, "[]")
		default:
			k, v, ok := strings.Cut(l, "=")
			if !ok {
				t.Fatalf("unit line %q", l)
			}
			keys[section+"."+k] = append(keys[section+"."+k], v)
		}
	}
	return keys
}

// TestSystemdUnit: the unit passes `systemd-analyze verify` (any warning
// fails too), holds the hardening keys, and agrees with the sample config
// it points at: the SQLite file in the StateDirectory, a stop timeout
// above request_timeout and shutdown_timeout.
func TestSystemdUnit(t *testing.T) {
	u := unit(t)
	for k, want := range map[string]string{
		"Service.DynamicUser":             "yes",
		"Service.ProtectSystem":           "strict",
		"Service.StateDirectory":          "contractd",
		"Service.ProtectHome":             "yes",
		"Service.PrivateTmp":              "yes",
		"Service.PrivateDevices":          "yes",
		"Service.NoNewPrivileges":         "yes",
		"Service.CapabilityBoundingSet":   "",
		"Service.RestrictAddressFamilies": "AF_INET AF_INET6 AF_UNIX",
		"Service.MemoryDenyWriteExecute":  "yes",
		"Service.SystemCallArchitectures": "native",
		"Service.ProtectKernelTunables":   "yes",
		"Service.KillSignal":              "SIGTERM",
		"Service.ExecReload":              "/bin/kill -HUP $MAINPID",
		"Install.WantedBy":                "multi-user.target",
	} {
		if v := u[k]; len(v) != 1 || v[0] != want {
			t.Errorf("%s = %q, want %q", k, v, want)
		}
	}
	exec0 := strings.Fields(u["Service.ExecStart"][0])
	if len(exec0) != 4 || exec0[1] != "serve" || exec0[2] != "-c" {
		t.Fatalf("ExecStart %v: want <binary> serve -c <config>", exec0)
	}
	if exec0[3] != "/etc/contractd/contractd.yaml" {
		t.Errorf("ExecStart reads %s; the docs install the config at /etc/contractd/contractd.yaml", exec0[3])
	}

	// The sample config for the unit loads, with the env the docs put in
	// the EnvironmentFile, and writes only under the StateDirectory.
	b, err := os.ReadFile("systemd/contractd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// docs/deploy.md's install steps put each file where the unit reads it
	// and name the variables the EnvironmentFile must hold.
	inst, envNames := systemdInstallDocs(t)
	for src, want := range map[string]string{
		"bin/contractd":                 exec0[0],
		"deploy/systemd/contractd.yaml": exec0[3],
		"/dev/null":                     strings.TrimPrefix(u["Service.EnvironmentFile"][0], "-"),
	} {
		if inst[src] != want {
			t.Errorf("docs/deploy.md installs %s at %q; the unit reads %q", src, inst[src], want)
		}
	}
	for _, e := range envNames {
		t.Setenv(e, "fake")
	}
	rt, err := config.LoadBytes(exec0[3], b)
	if err != nil {
		t.Fatalf("deploy/systemd/contractd.yaml with the variables docs/deploy.md puts in the EnvironmentFile (%v): %v", envNames, err)
	}
	for name := range configEnvNames(rt) {
		if !slices.Contains(envNames, name) {
			t.Errorf("the config reads %s; docs/deploy.md's EnvironmentFile line does not name it", name)
		}
	}
	for _, name := range envNames {
		if !configEnvNames(rt)[name] {
			t.Errorf("docs/deploy.md's EnvironmentFile line names %s, which the config does not read", name)
		}
	}
	state := "/var/lib/" + u["Service.StateDirectory"][0]
	if rt.Review.Store != "sqlite" || filepath.Dir(rt.Review.Path) != state || filepath.Dir(rt.Review.SpoolPath) != state {
		t.Errorf("review store %s at %s (spool %s): want sqlite under %s", rt.Review.Store, rt.Review.Path, rt.Review.SpoolPath, state)
	}
	if rt.Audit.Sink == "file" && filepath.Dir(rt.Audit.Path) != state {
		t.Errorf("audit file %s outside %s (ProtectSystem=strict)", rt.Audit.Path, state)
	}
	// Memory: the unit's MemoryMax is the cgroup limit that memory_limit
	// auto takes 80 % of; without one auto sets no limit at all.
	var memMax int64
	if v := u["Service.MemoryMax"]; len(v) > 0 {
		if memMax, err = systemdBytes(v[len(v)-1]); err != nil {
			t.Errorf("MemoryMax: %v", err)
		}
	}
	checkMemory(t, "the unit's MemoryMax", memMax, rt, "")
	stop, err := time.ParseDuration(u["Service.TimeoutStopSec"][0])
	if err != nil || stop <= max(rt.Server.RequestTimeout, rt.Server.ShutdownTimeout)+stopAfterDrain(t, rt) {
		t.Errorf("TimeoutStopSec %v not above max(request_timeout %v, shutdown_timeout %v) + the spool's last drain and span export %v",
			u["Service.TimeoutStopSec"], rt.Server.RequestTimeout, rt.Server.ShutdownTimeout, stopAfterDrain(t, rt))
	}

	// The audit on stdout is journal records: journald's per-unit rate
	// limit (10,000 per 30 s by default) would drop audit events under load.
	if rt.Audit.Sink == "stdout" {
		if v := u["Service.LogRateLimitIntervalSec"]; len(v) == 0 || v[len(v)-1] != "0" {
			t.Errorf("audit.sink is stdout (the journal) and LogRateLimitIntervalSec = %q: journald drops the lines past its rate limit, audit events included; want 0", v)
		}
	}

	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Log("systemd-analyze is not installed: checked the unit's keys only, not `systemd-analyze verify`")
		return
	}
	// verify needs ExecStart's binary to exist: point it at the one the
	// Dockerfile's command builds.
	bin := buildAsDockerfile(t)
	text, _ := os.ReadFile("systemd/contractd.service")
	p := filepath.Join(t.TempDir(), "contractd.service")
	if err := os.WriteFile(p, bytes.Replace(text, []byte("ExecStart="+exec0[0]), []byte("ExecStart="+bin), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(sa, "verify", p).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// systemdInstallDocs reads docs/deploy.md's systemd install block: each
// `install ... SRC DEST` (source -> destination) and the variables its
// EnvironmentFile comment names (`# CONTRACTD_API_KEYS=..., ...`).
func systemdInstallDocs(t *testing.T) (map[string]string, []string) {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "docs", "deploy.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(doc), "\n## 2. systemd\n")
	if !ok {
		t.Fatal("docs/deploy.md has no ## 2. systemd section")
	}
	sec, _, _ = strings.Cut(sec, "\n## ")
	inst := map[string]string{}
	var env []string
	for _, l := range strings.Split(sec, "\n") {
		cmd, comment, _ := strings.Cut(l, "#")
		f := strings.Fields(cmd)
		if len(f) < 3 || f[0] != "install" || f[1] == "-d" {
			continue
		}
		inst[f[len(f)-2]] = f[len(f)-1]
		if f[len(f)-2] == "/dev/null" {
			for _, m := range regexp.MustCompile(`([A-Z][A-Z0-9_]*)=`).FindAllStringSubmatch(comment, -1) {
				env = append(env, m[1])
			}
		}
	}
	if len(inst) < 3 || len(env) == 0 {
		t.Fatalf("docs/deploy.md's systemd block: installs %v, EnvironmentFile variables %v", inst, env)
	}
	return inst, env
}

func TestMain(m *testing.M) {
	// PostgresMain stops the PostgreSQL TestKitsRun started, if any.
	code := testkit.PostgresMain(m)
	if built.path != "" {
		os.RemoveAll(filepath.Dir(built.path))
	}
	os.Exit(code)
}
