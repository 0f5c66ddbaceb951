package deploy

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/labels"
)

// TestLogsCommandDocs: the kubectl logs command docs/observability.md gives
// to find which replica answered a request reads every pod of the
// Deployment, base and overlay: its label selector matches the pod
// template's labels, and it asks for the whole log (--tail=-1: with a
// selector kubectl shows each pod's last 10 lines) with each line's pod
// (--prefix).
func TestLogsCommandDocs(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "observability.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("`(kubectl [^`]* logs [^`]*)`").FindSubmatch(doc)
	if m == nil {
		t.Fatal("docs/observability.md has no `kubectl ... logs ...` command")
	}
	args := strings.Fields(string(m[1]))
	var sel string
	for i, a := range args {
		if a == "-l" && i+1 < len(args) {
			sel = args[i+1]
		}
	}
	for _, want := range []string{"--prefix", "--tail=-1", "-n"} {
		if !slices.Contains(args, want) {
			t.Errorf("%q lacks %s", m[1], want)
		}
	}
	s, err := labels.Parse(sel)
	if err != nil || sel == "" {
		t.Fatalf("%q: selector %q: %v", m[1], sel, err)
	}
	for _, dir := range []string{"kubernetes/base", "kubernetes/overlays/postgres-redis"} {
		for _, d := range render(t, dir).deployments {
			if !s.Matches(labels.Set(d.Spec.Template.Labels)) {
				t.Errorf("%s: %q does not select the pods of Deployment %s (labels %v)", dir, sel, d.Name, d.Spec.Template.Labels)
			}
		}
	}
}
