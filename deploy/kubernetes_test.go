package deploy

import (
	"fmt"
	"net"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/contractd/contractd/config"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// rendered is what `kubectl apply -k dir` would send, decoded strictly
// (an unknown field anywhere is an error) into the k8s.io/api types.
type rendered struct {
	deployments  []*appsv1.Deployment
	services     []*corev1.Service
	configMaps   []*corev1.ConfigMap
	accounts     []*corev1.ServiceAccount
	pdbs         []*policyv1.PodDisruptionBudget
	hpas         []*autoscalingv2.HorizontalPodAutoscaler
	byKindAndAPI map[string]int
}

func render(t *testing.T, dir string) *rendered {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	out := &rendered{byKindAndAPI: map[string]int{}}
	// The kinds the manifests may hold, each with the list its objects
	// are decoded into.
	into := map[string]func() any{
		"apps/v1 Deployment":                     func() any { return decodeInto(&out.deployments) },
		"v1 Service":                             func() any { return decodeInto(&out.services) },
		"v1 ConfigMap":                           func() any { return decodeInto(&out.configMaps) },
		"v1 ServiceAccount":                      func() any { return decodeInto(&out.accounts) },
		"policy/v1 PodDisruptionBudget":          func() any { return decodeInto(&out.pdbs) },
		"autoscaling/v2 HorizontalPodAutoscaler": func() any { return decodeInto(&out.hpas) },
	}
	for _, r := range m.Resources() {
		b, err := r.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		api, kind := r.GetApiVersion(), r.GetKind()
		out.byKindAndAPI[api+" "+kind]++
		newObj, ok := into[api+" "+kind]
		if !ok {
			t.Fatalf("%s: unexpected object %s %s", dir, api, kind)
		}
		if err := yaml.UnmarshalStrict(b, newObj()); err != nil {
			t.Fatalf("%s: %s %s does not decode strictly: %v\n%s", dir, kind, r.GetName(), err, b)
		}
	}
	return out
}

// decodeInto appends a new object to list and returns it for decoding.
func decodeInto[T any](list *[]*T) *T {
	o := new(T)
	*list = append(*list, o)
	return o
}

// TestKustomize renders the base and the overlay and checks that the
// manifests agree with the contractd.yaml they mount: probe ports and
// paths, the config path, the env variables the config names, the grace
// period against the config's timeouts, and the pod hardening (read-only
// root, no privilege escalation, no capabilities, non-root, no service
// account token) that keeps a compromised process from reaching further.
func TestKustomize(t *testing.T) {
	for _, tc := range []struct {
		dir        string
		replicas   int32
		rateStore  config.RateLimitStore
		namespace  string
		extraEnv   []string // beyond the base's
		reviewType config.ReviewStore
		docRow     string // the row of docs/deploy.md's first table
	}{
		{dir: "kubernetes/base", replicas: 2, rateStore: "memory", reviewType: "postgres", docRow: "| Kubernetes base |"},
		{dir: "kubernetes/overlays/postgres-redis", replicas: 3, rateStore: "redis", namespace: "contractd",
			extraEnv: []string{"CONTRACTD_REDIS_URL"}, reviewType: "postgres", docRow: "| overlay `postgres-redis` |"},
	} {
		t.Run(path.Base(tc.dir), func(t *testing.T) {
			r := render(t, tc.dir)
			for _, want := range []string{"apps/v1 Deployment", "v1 ConfigMap", "policy/v1 PodDisruptionBudget",
				"autoscaling/v2 HorizontalPodAutoscaler", "v1 ServiceAccount"} {
				if r.byKindAndAPI[want] != 1 {
					t.Errorf("%d %s, want 1", r.byKindAndAPI[want], want)
				}
			}
			if len(r.services) != 2 {
				t.Fatalf("%d Services, want 2 (api, admin)", len(r.services))
			}
			d := r.deployments[0]
			if tc.namespace != "" && d.Namespace != tc.namespace {
				t.Errorf("namespace %q", d.Namespace)
			}
			// The HPA owns the count: a Deployment that sets one has
			// every kubectl apply scale the fleet back to it.
			if d.Spec.Replicas != nil {
				t.Errorf("the Deployment sets replicas %d beside its HPA", *d.Spec.Replicas)
			}
			pod := d.Spec.Template.Spec
			if len(pod.Containers) != 1 {
				t.Fatalf("%d containers", len(pod.Containers))
			}
			c := pod.Containers[0]

			// The config the pods run: the ConfigMap behind the volume
			// mounted at the path given to serve -c.
			cfgPath := configPath(t, c)
			cm := mountedConfigMap(t, r, pod, c, cfgPath)
			text, ok := cm.Data[path.Base(cfgPath)]
			if !ok {
				t.Fatalf("ConfigMap %s has no %s (keys %v)", cm.Name, path.Base(cfgPath), keys(cm.Data))
			}
			env := secretEnv(t, c)
			for _, e := range tc.extraEnv {
				if _, ok := env[e]; !ok {
					t.Errorf("env %s missing", e)
				}
			}
			// Every variable the config names is set from a Secret, and no
			// Secret reference is left that the config does not use.
			for name := range env {
				t.Setenv(name, fakeSecret(name))
			}
			rt, err := config.LoadBytes(cfgPath, []byte(text))
			if err != nil {
				t.Fatalf("the mounted contractd.yaml does not load with the Deployment's env: %v", err)
			}
			used := configEnvNames(rt)
			for name := range used {
				if _, ok := env[name]; !ok {
					t.Errorf("the config names %s; the Deployment does not set it from a Secret", name)
				}
			}
			for name := range env {
				if !used[name] {
					t.Errorf("the Deployment sets %s, which the config does not use", name)
				}
			}
			if rt.Review.Store != tc.reviewType || rt.Server.RateLimit == nil || rt.Server.RateLimit.Store != tc.rateStore {
				t.Errorf("review store %s, rate limit %+v; want %s and %s", rt.Review.Store, rt.Server.RateLimit, tc.reviewType, tc.rateStore)
			}
			// The review spool is written beside the config file: that
			// directory must be writable under a read-only root.
			if !writableDir(pod, c, path.Dir(rt.Review.SpoolPath)) {
				t.Errorf("review spool %s is not on a writable volume", rt.Review.SpoolPath)
			}

			// Ports: the API and admin listeners, the probes, the Services.
			apiPort, adminPort := listenPort(t, rt.Server.Listen), listenPort(t, rt.Server.AdminListen)
			if rt.Server.AdminListen == "" {
				t.Fatal("admin_listen is empty: probes would share the API port")
			}
			ports := map[string]int32{}
			for _, p := range c.Ports {
				ports[p.Name] = p.ContainerPort
			}
			if ports["http"] != apiPort || ports["admin"] != adminPort {
				t.Errorf("container ports %v, config listens on %d and %d", ports, apiPort, adminPort)
			}
			for _, p := range []struct {
				name  string
				probe *corev1.Probe
				path  string
			}{{"readiness", c.ReadinessProbe, "/readyz"}, {"liveness", c.LivenessProbe, "/healthz"}, {"startup", c.StartupProbe, "/healthz"}} {
				if p.probe == nil || p.probe.HTTPGet == nil {
					t.Errorf("%s probe missing or not httpGet", p.name)
					continue
				}
				if got := portOf(p.probe.HTTPGet.Port.String(), ports); got != adminPort || p.probe.HTTPGet.Path != p.path {
					t.Errorf("%s probe GET %s on port %d, want %s on the admin port %d", p.name, p.probe.HTTPGet.Path, got, p.path, adminPort)
				}
			}
			// Scraping: the annotations name the admin listener's /metrics.
			if a := d.Spec.Template.Annotations; a["prometheus.io/scrape"] != "true" ||
				portOf(a["prometheus.io/port"], ports) != adminPort || a["prometheus.io/path"] != "/metrics" {
				t.Errorf("prometheus.io annotations %v: want scrape true, port %d, path /metrics", a, adminPort)
			}
			// A config change rolls the pods: the subPath mount never sees a
			// ConfigMap update, so the generated name must carry the hash.
			if !strings.HasPrefix(cm.Name, "contractd-config-") {
				t.Errorf("ConfigMap %s: no content hash in its name, so a config change would not roll the pods", cm.Name)
			}
			podLabels := labels.Set(d.Spec.Template.Labels)
			for _, s := range r.services {
				if !labels.SelectorFromSet(s.Spec.Selector).Matches(podLabels) || len(s.Spec.Selector) == 0 {
					t.Errorf("Service %s selects %v, pods are %v", s.Name, s.Spec.Selector, podLabels)
				}
				for _, sp := range s.Spec.Ports {
					if got := portOf(sp.TargetPort.String(), ports); got != apiPort && got != adminPort {
						t.Errorf("Service %s targets port %s (%d), not a listener", s.Name, sp.TargetPort.String(), got)
					}
				}
			}

			// Draining: preStop, then SIGTERM with shutdown_timeout, all
			// within the grace period, which exceeds request_timeout.
			if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Sleep == nil {
				t.Fatal("no preStop sleep")
			}
			preStop := time.Duration(c.Lifecycle.PreStop.Sleep.Seconds) * time.Second
			grace := time.Duration(*pod.TerminationGracePeriodSeconds) * time.Second
			need := preStop + max(rt.Server.RequestTimeout, rt.Server.ShutdownTimeout) + stopAfterDrain(t, rt)
			if grace <= need {
				t.Errorf("terminationGracePeriodSeconds %v: not above preStop %v + max(request_timeout %v, shutdown_timeout %v) + the spool's last drain and span export %v",
					grace, preStop, rt.Server.RequestTimeout, rt.Server.ShutdownTimeout, stopAfterDrain(t, rt))
			}

			// Hardening.
			sc, psc := c.SecurityContext, pod.SecurityContext
			switch {
			case sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
				t.Error("root filesystem not read-only")
			case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
				t.Error("privilege escalation allowed")
			case sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL":
				t.Error("capabilities not dropped")
			case psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser == 0:
				t.Error("pod may run as root")
			}
			if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
				t.Error("service account token mounted (contractd never calls the API server)")
			}
			for _, res := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
				if c.Resources.Requests.Name(res, "").IsZero() || c.Resources.Limits.Name(res, "").IsZero() {
					t.Errorf("%s request or limit missing", res)
				}
			}
			// Memory: Go's soft limit and the in-flight budget fit the
			// container's limit (the kernel kills the pod above it).
			checkMemory(t, "the container's memory limit", c.Resources.Limits.Memory().Value(), rt, literalEnv(c, "GOMEMLIMIT"))

			// Availability: the PDB and the HPA cover these pods.
			pdb := r.pdbs[0]
			if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() < 1 || !selects(t, pdb.Spec.Selector.MatchLabels, podLabels) {
				t.Errorf("PDB %+v does not keep a replica of these pods", pdb.Spec)
			}
			hpa := r.hpas[0]
			if hpa.Spec.ScaleTargetRef.Kind != "Deployment" || hpa.Spec.ScaleTargetRef.Name != d.Name ||
				hpa.Spec.MinReplicas == nil || *hpa.Spec.MinReplicas < 2 || hpa.Spec.MaxReplicas < *hpa.Spec.MinReplicas {
				t.Errorf("HPA %+v", hpa.Spec)
			}
			// The HPA's floor is the fleet's size at rest, and the docs'
			// table says so.
			if hpa.Spec.MinReplicas != nil && *hpa.Spec.MinReplicas != tc.replicas {
				t.Errorf("HPA minReplicas %d, want %d", *hpa.Spec.MinReplicas, tc.replicas)
			}
			if row := docLine(t, tc.docRow); hpa.Spec.MinReplicas != nil &&
				!strings.Contains(row, fmt.Sprintf("| %d–%d (HPA) |", *hpa.Spec.MinReplicas, hpa.Spec.MaxReplicas)) {
				t.Errorf("docs/deploy.md: %q; the HPA runs %d–%d replicas", row, *hpa.Spec.MinReplicas, hpa.Spec.MaxReplicas)
			}
			if !selects(t, d.Spec.Selector.MatchLabels, podLabels) {
				t.Errorf("Deployment selector %v does not select its pods %v", d.Spec.Selector.MatchLabels, podLabels)
			}
		})
	}
}

// docLine is the line of docs/deploy.md that starts with prefix.
func docLine(t *testing.T, prefix string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "docs", "deploy.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	t.Fatalf("docs/deploy.md has no line starting %q", prefix)
	return ""
}

// configPath is the file given to `serve -c`.
func configPath(t *testing.T, c corev1.Container) string {
	args := append(append([]string{}, c.Command...), c.Args...)
	for i, a := range args {
		if a == "-c" && i+1 < len(args) {
			if args[0] != "serve" && (len(c.Command) == 0 || c.Args[0] != "serve") {
				t.Fatalf("container does not run serve: %v", args)
			}
			return args[i+1]
		}
	}
	t.Fatalf("no -c in %v", args)
	return ""
}

// mountedConfigMap finds the ConfigMap that provides file p in c.
func mountedConfigMap(t *testing.T, r *rendered, pod corev1.PodSpec, c corev1.Container, p string) *corev1.ConfigMap {
	t.Helper()
	for _, m := range c.VolumeMounts {
		var file string
		switch {
		case m.MountPath == p && m.SubPath != "":
			file = m.SubPath
		case m.MountPath == path.Dir(p) && m.SubPath == "":
			file = path.Base(p)
		default:
			continue
		}
		for _, v := range pod.Volumes {
			if v.Name != m.Name || v.ConfigMap == nil {
				continue
			}
			for _, cm := range r.configMaps {
				if cm.Name == v.ConfigMap.Name {
					if file != path.Base(p) {
						t.Fatalf("mount of %s takes key %s", p, file)
					}
					return cm
				}
			}
			t.Fatalf("volume %s names ConfigMap %s, which is not rendered", v.Name, v.ConfigMap.Name)
		}
	}
	t.Fatalf("nothing mounts %s from a ConfigMap", p)
	return nil
}

// writableDir: dir is a mount point of a writable, non-ConfigMap volume.
func writableDir(pod corev1.PodSpec, c corev1.Container, dir string) bool {
	for _, m := range c.VolumeMounts {
		if m.MountPath != dir || m.ReadOnly || m.SubPath != "" {
			continue
		}
		for _, v := range pod.Volumes {
			if v.Name == m.Name && (v.EmptyDir != nil || v.PersistentVolumeClaim != nil) {
				return true
			}
		}
	}
	return false
}

// literalEnv is the literal value of the container's variable name ("" when unset).
func literalEnv(c corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

// secretEnv is the container's env set from Secrets (name -> secret/key).
func secretEnv(t *testing.T, c corev1.Container) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, e := range c.Env {
		if e.Value != "" && strings.Contains(strings.ToLower(e.Name), "key") {
			t.Errorf("env %s has a literal value: keys come from Secrets", e.Name)
		}
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			out[e.Name] = e.ValueFrom.SecretKeyRef.Name + "/" + e.ValueFrom.SecretKeyRef.Key
		}
	}
	return out
}

// configEnvNames are the variables a Runtime reads secrets from.
func configEnvNames(rt *config.Runtime) map[string]bool {
	names := map[string]bool{}
	add := func(n string) {
		if n != "" {
			names[n] = true
		}
	}
	add(rt.Server.APIKeysEnv)
	add(rt.Server.AdminKeysEnv)
	if rl := rt.Server.RateLimit; rl != nil && rl.Store == "redis" {
		add(rl.RedisURLEnv)
	}
	if rt.Review.Store == "postgres" {
		add(rt.Review.DSNEnv)
	}
	if rt.Review.Webhook != nil {
		add(rt.Review.Webhook.SecretEnv)
	}
	for _, u := range rt.Upstreams {
		add(u.APIKeyEnv)
	}
	return names
}

func fakeSecret(name string) string {
	switch {
	case strings.Contains(name, "REDIS"):
		return "redis://127.0.0.1:6379/0"
	case strings.Contains(name, "DSN"):
		return "postgres://contractd@127.0.0.1:5432/contractd"
	}
	return "fake-" + strings.ToLower(name)
}

func listenPort(t *testing.T, addr string) int32 {
	t.Helper()
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("listen %q: %v", addr, err)
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		t.Errorf("listen %q: loopback is unreachable for probes and Services", addr)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatalf("listen %q: %v", addr, err)
	}
	return int32(n)
}

// portOf resolves a probe's or Service's port (a number or a port name).
func portOf(s string, named map[string]int32) int32 {
	if n, err := strconv.Atoi(s); err == nil {
		return int32(n)
	}
	return named[s]
}

func selects(t *testing.T, sel map[string]string, pod labels.Set) bool {
	return len(sel) > 0 && labels.SelectorFromSet(sel).Matches(pod)
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
