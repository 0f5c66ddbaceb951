package deploy

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestSecretDocs: the Secret docs/deploy.md tells to create is the one the
// Deployments reference, with exactly the keys their secretKeyRefs read
// (base and overlay together): a key missing from the docs leaves a pod in
// CreateContainerConfigError. The command takes no value on its command line
// (--from-literal puts every key in the shell's history and in ps): the
// values come from the --from-env-file the docs show.
func TestSecretDocs(t *testing.T) {
	refs := map[string]map[string]bool{} // secret -> keys
	for _, dir := range []string{"kubernetes/base", "kubernetes/overlays/postgres-redis"} {
		for _, d := range render(t, dir).deployments {
			for _, c := range d.Spec.Template.Spec.Containers {
				for _, e := range c.Env {
					if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
						r := e.ValueFrom.SecretKeyRef
						if refs[r.Name] == nil {
							refs[r.Name] = map[string]bool{}
						}
						refs[r.Name][r.Key] = true
					}
				}
			}
		}
	}
	doc, err := os.ReadFile(filepath.Join("..", "docs", "deploy.md"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := regexp.MustCompile(`(?m)^kubectl .*create secret generic (?:.*\\\n)*.*$`).Find(doc)
	if cmd == nil {
		t.Fatal("docs/deploy.md has no `kubectl ... create secret generic` command")
	}
	args := strings.Fields(strings.ReplaceAll(string(cmd), "\\\n", " "))
	i := slices.Index(args, "generic")
	if i < 0 || i+1 >= len(args) {
		t.Fatalf("no secret name in %q", cmd)
	}
	name := args[i+1]
	documented := map[string]bool{}
	envFile := ""
	for _, a := range args {
		if strings.HasPrefix(a, "--from-literal") {
			t.Errorf("docs/deploy.md's kubectl create secret puts a value on its command line (shell history, ps): %s", a)
		}
		if v, ok := strings.CutPrefix(a, "--from-env-file="); ok {
			envFile = v
		}
	}
	if envFile == "" {
		t.Fatalf("docs/deploy.md's kubectl create secret reads no --from-env-file: %q", cmd)
	}
	// The file's contents, as the docs show them: a fenced block whose
	// first line is "# FILE: ...", each other line key=value.
	block := regexp.MustCompile("(?m)^```[a-z]*\n# " + regexp.QuoteMeta(envFile) + ":.*\n((?:.*\n)*?)```").FindSubmatch(doc)
	if block == nil {
		t.Fatalf("docs/deploy.md does not show %s (a block starting with \"# %s:\")", envFile, envFile)
	}
	for _, l := range strings.Split(strings.TrimSpace(string(block[1])), "\n") {
		k, v, ok := strings.Cut(l, "=")
		if !ok || k == "" || v == "" || strings.ContainsAny(k, " #") {
			t.Errorf("%s line %q: want key=value", envFile, l)
			continue
		}
		documented[k] = true
	}
	if len(refs) != 1 || refs[name] == nil {
		t.Fatalf("the Deployments read Secrets %v; docs/deploy.md creates %s", refs, name)
	}
	for k := range refs[name] {
		if !documented[k] {
			t.Errorf("the Deployments read %s/%s; docs/deploy.md's kubectl create secret does not set it", name, k)
		}
	}
	for k := range documented {
		if !refs[name][k] {
			t.Errorf("docs/deploy.md's kubectl create secret sets %s, which no Deployment reads", k)
		}
	}
}
