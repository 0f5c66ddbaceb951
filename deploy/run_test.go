package deploy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/contractd/contractd/config"
	"github.com/contractd/contractd/internal/testkit"
	corev1 "k8s.io/api/core/v1"
)

// The kits run for real: no container engine, kubelet or systemd runs
// here, so each kit's manifests are read for how they start contractd
// (command line, env and the secrets behind it, config file and content,
// writable paths, user, ports, probes, stop timeout) and the binary the
// Dockerfile builds is started that way, with the kit's absolute paths
// mapped under a temporary root. As root the process runs as the kit's
// user (runAsUser, the image's USER, a systemd dynamic user's uid) in a
// tree it can write only where the kit mounts a writable volume; as
// another user the rest of the tree is chmod'ed read-only.

// kitRun is how a kit starts contractd, in the kit's own paths.
type kitRun struct {
	argv       []string          // argv[0]: the binary's path
	env        map[string]string // literal values (the image's ENV, the container's env)
	secrets    map[string]string // variable -> where the kit takes it from
	workdir    string
	uid, gid   int
	config     string // the file serve reads
	configText []byte
	configRO   string   // the config file, or its directory, mounted read-only
	writable   []string // directories the process may write
	probes     []kitProbe
	startup    time.Duration // how long the kit lets it take to answer its first probe
	grace      time.Duration // SIGTERM to SIGKILL
}

type kitProbe struct {
	name, path string
	port       int32
}

// dynamicUID stands in for systemd's DynamicUser (its range starts at 61184).
const dynamicUID = 61184

func TestKitsRun(t *testing.T) {
	d := readDockerfile(t)
	bin := buildAsDockerfile(t)
	for _, dir := range []string{"kubernetes/base", "kubernetes/overlays/postgres-redis"} {
		t.Run(path.Base(dir), func(t *testing.T) { runKit(t, bin, kubernetesRun(t, dir, d)) })
	}
	t.Run("systemd", func(t *testing.T) { runKit(t, bin, systemdRun(t)) })
}

// kubernetesRun reads the rendered Deployment (and the image it runs).
func kubernetesRun(t *testing.T, dir string, d dockerfile) kitRun {
	r := render(t, dir)
	pod := r.deployments[0].Spec.Template.Spec
	c := pod.Containers[0]
	k := kitRun{env: map[string]string{}, secrets: secretEnv(t, c)}
	// The image's ENTRYPOINT, CMD, WORKDIR and ENV, as the container
	// runtime combines them with the container's.
	entry, cmd := jsonArray(t, d.final["ENTRYPOINT"]), jsonArray(t, d.final["CMD"])
	switch {
	case len(c.Command) > 0:
		k.argv = append(slices.Clone(c.Command), c.Args...)
	case len(c.Args) > 0:
		k.argv = append(entry, c.Args...)
	default:
		k.argv = append(entry, cmd...)
	}
	for _, e := range d.final["ENV"] {
		name, v, _ := strings.Cut(e, "=")
		k.env[name] = v
	}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			k.env[e.Name] = e.Value
		}
	}
	k.workdir = c.WorkingDir
	if k.workdir == "" {
		k.workdir = d.final["WORKDIR"][len(d.final["WORKDIR"])-1]
	}
	k.uid, k.gid = -1, -1
	for _, sc := range []*corev1.PodSecurityContext{pod.SecurityContext} {
		if sc != nil && sc.RunAsUser != nil {
			k.uid = int(*sc.RunAsUser)
		}
		if sc != nil && sc.RunAsGroup != nil {
			k.gid = int(*sc.RunAsGroup)
		}
	}
	if sc := c.SecurityContext; sc != nil && sc.RunAsUser != nil {
		k.uid = int(*sc.RunAsUser)
	}
	if sc := c.SecurityContext; sc != nil && sc.RunAsGroup != nil {
		k.gid = int(*sc.RunAsGroup)
	}
	if k.uid <= 0 || k.gid <= 0 {
		t.Fatalf("the pod sets no non-root runAsUser/runAsGroup (%d:%d)", k.uid, k.gid)
	}
	k.config = configPath(t, c)
	cm := mountedConfigMap(t, r, pod, c, k.config)
	k.configText = []byte(cm.Data[path.Base(k.config)])
	volumes := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		volumes[v.Name] = v
	}
	for _, m := range c.VolumeMounts {
		v := volumes[m.Name]
		switch {
		case v.ConfigMap != nil:
			if !m.ReadOnly {
				t.Errorf("ConfigMap volume %s mounted writable at %s", m.Name, m.MountPath)
			}
			k.configRO = m.MountPath
		case (v.EmptyDir != nil || v.PersistentVolumeClaim != nil) && !m.ReadOnly && m.SubPath == "":
			k.writable = append(k.writable, m.MountPath)
		}
	}
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	for _, p := range []struct {
		name  string
		probe *corev1.Probe
	}{{"startup", c.StartupProbe}, {"readiness", c.ReadinessProbe}, {"liveness", c.LivenessProbe}} {
		if p.probe == nil || p.probe.HTTPGet == nil {
			t.Fatalf("%s probe missing or not httpGet", p.name)
		}
		k.probes = append(k.probes, kitProbe{p.name, p.probe.HTTPGet.Path, portOf(p.probe.HTTPGet.Port.String(), ports)})
	}
	sp := c.StartupProbe
	k.startup = time.Duration(sp.InitialDelaySeconds+sp.PeriodSeconds*sp.FailureThreshold) * time.Second
	k.grace = time.Duration(*pod.TerminationGracePeriodSeconds) * time.Second
	return k
}

// systemdRun reads the unit and the config docs/deploy.md installs for it.
func systemdRun(t *testing.T) kitRun {
	u := unit(t)
	k := kitRun{env: map[string]string{}, secrets: map[string]string{}, uid: dynamicUID, gid: dynamicUID}
	if v := u["Service.DynamicUser"]; len(v) == 0 || v[0] != "yes" {
		t.Fatal("the unit has no DynamicUser=yes: say which user the test runs it as")
	}
	k.argv = strings.Fields(u["Service.ExecStart"][0])
	inst, envNames := systemdInstallDocs(t)
	envFile := strings.TrimPrefix(u["Service.EnvironmentFile"][0], "-")
	for _, e := range envNames {
		k.secrets[e] = envFile
	}
	for _, e := range u["Service.Environment"] {
		for _, kv := range strings.Fields(e) {
			name, v, _ := strings.Cut(strings.Trim(kv, `"`), "=")
			k.env[name] = v
		}
	}
	k.workdir = u["Service.WorkingDirectory"][0]
	k.config = configPath(t, corev1.Container{Args: k.argv[1:]})
	for src, dst := range inst {
		if dst == k.config {
			b, err := os.ReadFile(filepath.Join("..", src))
			if err != nil {
				t.Fatal(err)
			}
			k.configText = b
		}
	}
	if k.configText == nil {
		t.Fatalf("docs/deploy.md installs nothing at %s", k.config)
	}
	// ProtectSystem=strict: all but the state directory, ReadWritePaths
	// and the private /tmp is read-only, the config's directory included.
	if v := u["Service.ProtectSystem"]; len(v) == 0 || v[0] != "strict" {
		t.Fatalf("ProtectSystem %v: the test maps only strict", v)
	}
	k.configRO = path.Dir(k.config)
	for _, s := range u["Service.StateDirectory"] {
		for _, d := range strings.Fields(s) {
			k.writable = append(k.writable, "/var/lib/"+d)
		}
	}
	for _, s := range u["Service.ReadWritePaths"] {
		k.writable = append(k.writable, strings.Fields(s)...)
	}
	if v := u["Service.PrivateTmp"]; len(v) > 0 && v[0] == "yes" {
		k.writable = append(k.writable, "/tmp")
	}
	// The unit names no probe: the admin listener's endpoints the docs'
	// systemd section points health checks at, on the port the config's
	// admin_listen names (filled in by runKit).
	k.probes = []kitProbe{{"health", "/healthz", 0}, {"ready", "/readyz", 0}}
	// Type=exec: started once exec succeeded; TimeoutStartSec (default 90 s)
	// does not apply to answering. The first answer is awaited as long.
	k.startup = 90 * time.Second
	stop, err := time.ParseDuration(u["Service.TimeoutStopSec"][0])
	if err != nil {
		t.Fatal(err)
	}
	k.grace = stop
	return k
}

func jsonArray(t *testing.T, v []string) []string {
	t.Helper()
	if len(v) == 0 {
		return nil
	}
	var out []string
	if err := json.Unmarshal([]byte(v[len(v)-1]), &out); err != nil {
		t.Fatalf("%q: not the exec (JSON) form: %v", v[len(v)-1], err)
	}
	return out
}

// runKit starts contractd as k says, under a temporary root, and checks
// it serves, stores a needs_review item, drains on SIGTERM and writes
// only where the kit lets it.
func runKit(t *testing.T, bin string, k kitRun) {
	root, err := os.MkdirTemp("", "contractd-kit-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		filepath.WalkDir(root, func(p string, _ fs.DirEntry, _ error) error { return os.Chmod(p, 0o755) })
		os.RemoveAll(root)
	})
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	asRoot := os.Geteuid() == 0
	uid, gid := os.Getuid(), os.Getgid()
	if asRoot {
		uid, gid = k.uid, k.gid
	}
	host := func(p string) string {
		if !path.IsAbs(p) {
			t.Fatalf("%q: not an absolute path", p)
		}
		return filepath.Join(root, p)
	}
	mkdir := func(p string) {
		if err := os.MkdirAll(host(p), 0o755); err != nil {
			t.Fatal(err)
		}
	}

	// Config: the kit's secrets get fake values (the review DSN and the
	// Redis URL real servers, when the config names them); it loads with
	// them; its listeners, upstreams and paths are mapped.
	env := map[string]string{}
	for name := range k.secrets {
		env[name] = fakeSecret(name)
	}
	for name, v := range env {
		t.Setenv(name, v)
	}
	rt, err := config.LoadBytes(k.config, k.configText)
	if err != nil {
		t.Fatalf("%s does not load with the kit's env: %v", k.config, err)
	}
	for name := range configEnvNames(rt) {
		if _, ok := k.secrets[name]; !ok {
			t.Errorf("the config reads %s; the kit does not set it", name)
		}
	}
	if rt.Review.Store == config.ReviewPostgres {
		env[rt.Review.DSNEnv] = testkit.PostgresDSN(t)
	}
	if rl := rt.Server.RateLimit; rl != nil && rl.Store == config.RateLimitRedis {
		env[rl.RedisURLEnv] = testkit.RedisURL(t)
	}

	var bad atomic.Bool  // the next answers break the contract
	var slow atomic.Bool // the next answers take a second
	good, wrong := contractOutputs(t, rt)
	up := testkit.NewUpstream(t, func(w http.ResponseWriter, r *http.Request, c *testkit.Call) {
		out := good
		if slow.Load() {
			time.Sleep(time.Second)
		}
		if bad.Load() {
			out = wrong
		}
		testkit.Reply(w, 200, testkit.Completion{Model: "m", Content: out}.JSON())
	})
	text := string(k.configText)
	for _, u := range rt.Upstreams {
		text = strings.ReplaceAll(text, "base_url: "+u.BaseURL, "base_url: "+up.URL())
	}
	addrs := map[int32]string{} // the kit's port -> where it listens here
	free := testkit.FreeAddrs(t, 2)
	for i, l := range []string{rt.Server.Listen, rt.Server.AdminListen} {
		a := free[i]
		addrs[listenPortOf(t, l)] = a
		text = strings.ReplaceAll(text, "listen: "+l, "listen: "+a)
	}
	mapped := append([]string{k.configRO, k.workdir}, k.writable...)
	sort.Slice(mapped, func(i, j int) bool { return len(mapped[i]) > len(mapped[j]) })
	var pairs []string // one pass: host paths may lie under a kit's path (/tmp)
	for _, p := range mapped {
		pairs = append(pairs, " "+p+"/", " "+host(p)+"/")
	}
	text = strings.NewReplacer(pairs...).Replace(text)
	hostRT, err := config.LoadBytes(host(k.config), []byte(text))
	if err != nil {
		t.Fatalf("the mapped config: %v", err)
	}
	if hostRT.Server.Listen != addrs[listenPortOf(t, rt.Server.Listen)] || hostRT.Server.AdminListen != addrs[listenPortOf(t, rt.Server.AdminListen)] {
		t.Fatalf("the listeners were not mapped: %s %s", hostRT.Server.Listen, hostRT.Server.AdminListen)
	}
	for i := range k.probes {
		if k.probes[i].port == 0 {
			k.probes[i].port = listenPortOf(t, rt.Server.AdminListen)
		}
		if addrs[k.probes[i].port] == "" {
			t.Fatalf("%s probe's port %d: nothing listens there (listen %s, admin_listen %s)", k.probes[i].name, k.probes[i].port, rt.Server.Listen, rt.Server.AdminListen)
		}
	}

	// The tree: the binary, the config (read-only), the writable
	// directories owned by the kit's user; nothing else writable.
	argv := slices.Clone(k.argv)
	mkdir(path.Dir(argv[0]))
	copyFile(t, bin, host(argv[0]), 0o555)
	for i := 1; i < len(argv); i++ {
		if path.IsAbs(argv[i]) {
			argv[i] = host(argv[i])
		}
	}
	for _, w := range k.writable {
		mkdir(w)
		if err := os.Chown(host(w), uid, gid); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(host(w), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	mkdir(path.Dir(k.config))
	mkdir(k.workdir)
	if err := os.WriteFile(host(k.config), []byte(text), 0o444); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(host(k.config), 0o444); err != nil {
		t.Fatal(err)
	}
	writableHost := func(p string) bool {
		for _, w := range k.writable {
			if p == host(w) || strings.HasPrefix(p, host(w)+"/") {
				return true
			}
		}
		return false
	}
	// Everything but the writable directories: root's 0755 (the kit's
	// user cannot write it), or read-only for a test run as that user.
	filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil || writableHost(p) {
			return fs.SkipDir
		}
		if !asRoot && e.IsDir() {
			return os.Chmod(p, 0o555)
		}
		return nil
	})
	before := snapshot(t, root, writableHost)

	// Start it with nothing but the kit's environment.
	procEnv := []string{}
	for name, v := range k.env {
		if path.IsAbs(v) {
			v = host(v)
		}
		procEnv = append(procEnv, name+"="+v)
	}
	for name, v := range env {
		procEnv = append(procEnv, name+"="+v)
	}
	if slices.Contains(k.writable, "/tmp") {
		procEnv = append(procEnv, "TMPDIR="+host("/tmp"))
	}
	cmd := exec.Command(host(k.argv[0]), argv[1:]...)
	cmd.Env = procEnv
	cmd.Dir = host(k.workdir)
	stdout, stderr := &testkit.SyncBuffer{}, &testkit.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if asRoot {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			<-done
		}
	})
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf(format+"\nlog:\n%s", append(args, stderr.String())...)
	}

	// Probes: the first (startup) answers 200 within the kit's budget,
	// then every probe does, on the port the manifest names.
	client := &http.Client{Timeout: 10 * time.Second}
	get := func(addr, p, key string) (int, []byte) {
		req, _ := http.NewRequest("GET", "http://"+addr+p, nil)
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, nil
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	first := k.probes[0]
	if !waitUntil(k.startup, func() bool { code, _ := get(addrs[first.port], first.path, ""); return code == 200 }) {
		fail("%s probe GET %s on port %d: no 200 within %v", first.name, first.path, first.port, k.startup)
	}
	for _, p := range k.probes {
		// readiness waits for the review store; give it the startup budget.
		if !waitUntil(k.startup, func() bool { code, _ := get(addrs[p.port], p.path, ""); return code == 200 }) {
			code, b := get(addrs[p.port], p.path, "")
			fail("%s probe GET %s on port %d: %d %s", p.name, p.path, p.port, code, b)
		}
	}

	// A chat request through it, then one the contract refuses: a
	// needs_review item, stored, which the reviewer API finds.
	api, admin := addrs[listenPortOf(t, rt.Server.Listen)], addrs[listenPortOf(t, rt.Server.AdminListen)]
	apiKey, adminKey := firstKey(env[rt.Server.APIKeysEnv]), firstKey(env[rt.Server.AdminKeysEnv])
	route := rt.RouteList[0]
	input := route.Prompt.ExampleInput
	if input == nil {
		t.Fatalf("route %s's prompt has no example_input to send", route.Name)
	}
	chat := func(in any) (int, []byte) {
		body, _ := json.Marshal(map[string]any{"model": route.Name, "messages": []any{}, "contract_input": in})
		req, _ := http.NewRequest("POST", "http://"+api+"/v1/chat/completions", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+apiKey)
		resp, err := client.Do(req)
		if err != nil {
			fail("chat request: %v", err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	if code, b := chat(input); code != 200 || !strings.Contains(string(b), strings.ReplaceAll(good, `"`, `\"`)) {
		fail("chat request: %d %s", code, b)
	}
	calls := up.Calls()
	if len(calls) == 0 || calls[0].Header.Get("Authorization") != "Bearer "+env[route.Upstream.APIKeyEnv] {
		t.Errorf("the upstream was not called with %s's key", route.Upstream.APIKeyEnv)
	}
	bad.Store(true)
	code, b := chat(input)
	var e struct {
		Error struct {
			Type   string `json:"type"`
			Review struct {
				ID     string `json:"id"`
				Stored bool   `json:"stored"`
			} `json:"review"`
		} `json:"error"`
	}
	if code != 422 || json.Unmarshal(b, &e) != nil || e.Error.Type != "needs_review" || !e.Error.Review.Stored {
		fail("a reply that breaks the contract: %d %s; want 422 needs_review, stored", code, b)
	}
	if code, b := get(admin, "/admin/reviews/"+e.Error.Review.ID, adminKey); code != 200 || !strings.Contains(string(b), e.Error.Review.ID) {
		fail("GET /admin/reviews/%s: %d %s", e.Error.Review.ID, code, b)
	}
	if rt.Review.Store == config.ReviewSQLite {
		if _, err := os.Stat(hostRT.Review.Path); err != nil || !writableHost(hostRT.Review.Path) {
			t.Errorf("the SQLite store %s: %v (in a writable path: %v)", hostRT.Review.Path, err, writableHost(hostRT.Review.Path))
		}
	}
	if !strings.Contains(stdout.String(), `"outcome":"needs_review"`) && rt.Audit.Sink == "stdout" {
		t.Errorf("audit.sink stdout: no needs_review audit line on stdout:\n%s", stdout.String())
	}
	// Every file it holds open for writing is in a writable path.
	for _, f := range openForWriting(t, cmd.Process.Pid) {
		if !writableHost(f) {
			t.Errorf("open for writing outside the kit's writable paths %v: %s", k.writable, f)
		}
	}
	for _, l := range strings.Split(stderr.String(), "\n") {
		if strings.Contains(l, `"level":"WARN"`) || strings.Contains(l, `"level":"ERROR"`) {
			t.Errorf("a warning or error under the kit: %s", l)
		}
	}

	// SIGTERM drains: a request in flight at SIGTERM is answered, the
	// readiness probe turns 503 meanwhile, and the process exits 0 within
	// the kit's stop timeout.
	bad.Store(false)
	slow.Store(true)
	hits := up.Hits()
	inflight := make(chan int, 1)
	// Another input: the same one would be answered from the needs_review
	// dedupe window without reaching the upstream.
	other := input
	if m, ok := input.(map[string]any); ok {
		other = maps.Clone(m)
		for k, v := range m {
			if s, ok := v.(string); ok {
				other.(map[string]any)[k] = s + " (drain)"
				break
			}
		}
	}
	go func() { code, _ := chat(other); inflight <- code }()
	if !waitUntil(10*time.Second, func() bool { return up.Hits() > hits }) {
		fail("the request sent before SIGTERM never reached the upstream")
	}
	start := time.Now()
	cmd.Process.Signal(syscall.SIGTERM)
	ready := k.probes[len(k.probes)-1]
	for _, p := range k.probes {
		if p.name == "readiness" || p.name == "ready" {
			ready = p
		}
	}
	if !waitUntil(500*time.Millisecond, func() bool { code, _ := get(addrs[ready.port], ready.path, ""); return code == 503 }) {
		t.Errorf("%s probe during the drain: no 503", ready.name)
	}
	if code := <-inflight; code != 200 {
		t.Errorf("the request in flight at SIGTERM: %d, want 200", code)
	}
	select {
	case err := <-done:
		if err != nil {
			fail("exit after SIGTERM: %v", err)
		}
		t.Logf("SIGTERM to exit: %v (the kit allows %v)", time.Since(start).Round(time.Millisecond), k.grace)
	case <-time.After(k.grace):
		fail("still running %v after SIGTERM (the kit's stop timeout)", k.grace)
	}

	// Nothing changed outside the writable paths.
	after := snapshot(t, root, writableHost)
	for p, s := range after {
		if before[p] != s {
			t.Errorf("written outside the kit's writable paths %v: %s (%s, was %q)", k.writable, p, s, before[p])
		}
	}
	for p := range before {
		if _, ok := after[p]; !ok {
			t.Errorf("removed outside the kit's writable paths: %s", p)
		}
	}
}

// contractOutputs are a model reply the route's contract accepts and one
// it sends to review: a value outside the label set the policy names.
func contractOutputs(t *testing.T, rt *config.Runtime) (good, wrong string) {
	t.Helper()
	if len(rt.Labels) != 1 {
		t.Fatalf("label sets %v: the test sends a value of the one the contract's policy sets", rt.Labels)
	}
	for name, values := range rt.Labels {
		return fmt.Sprintf(`{"%s":"%s"}`, name, values[0]), fmt.Sprintf(`{"%s":"not %s"}`, name, values[0])
	}
	return "", ""
}

func firstKey(list string) string { k, _, _ := strings.Cut(list, ","); return strings.TrimSpace(k) }

func listenPortOf(t *testing.T, addr string) int32 {
	t.Helper()
	_, p, err := netSplit(addr)
	if err != nil {
		t.Fatalf("listen %q: %v", addr, err)
	}
	return p
}

func netSplit(addr string) (string, int32, error) {
	i := strings.LastIndex(addr, ":")
	if i < 0 {
		return "", 0, fmt.Errorf("no port")
	}
	n, err := strconv.Atoi(addr[i+1:])
	return addr[:i], int32(n), err
}

func copyFile(t *testing.T, src, dst string, mode os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, mode); err != nil {
		t.Fatal(err)
	}
}

// snapshot is every entry under root outside the writable paths: mode,
// size and modification time.
func snapshot(t *testing.T, root string, writable func(string) bool) map[string]string {
	t.Helper()
	out := map[string]string{}
	filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			t.Errorf("%s: %v", p, err)
			return nil
		}
		if writable(p) {
			return fs.SkipDir
		}
		fi, err := e.Info()
		if err != nil {
			return nil
		}
		out[p] = fmt.Sprintf("%v %d %d", fi.Mode(), fi.Size(), fi.ModTime().UnixNano())
		return nil
	})
	return out
}

// openForWriting lists the files process pid holds open for writing.
func openForWriting(t *testing.T, pid int) []string {
	t.Helper()
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("reading the process's open files: %v", err)
	}
	var out []string
	for _, e := range ents {
		target, err := os.Readlink(filepath.Join(dir, e.Name()))
		if err != nil || !strings.HasPrefix(target, "/") || strings.HasPrefix(target, "/dev/") {
			continue // a socket, pipe, anon inode, or a device (/dev/null)
		}
		info, err := os.ReadFile(fmt.Sprintf("/proc/%d/fdinfo/%s", pid, e.Name()))
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(info), "\n") {
			if v, ok := strings.CutPrefix(l, "flags:"); ok {
				flags, _ := strconv.ParseInt(strings.TrimSpace(v), 8, 64)
				if flags&(syscall.O_WRONLY|syscall.O_RDWR) != 0 {
					out = append(out, strings.TrimSuffix(target, " (deleted)"))
				}
			}
		}
	}
	return out
}

// waitUntil polls cond every 50 ms until it holds or d passes.
func waitUntil(d time.Duration, cond func() bool) bool {
	return testkit.WaitFor(d, 50*time.Millisecond, cond)
}
