package config

import (
	"flag"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/contractd/contractd/internal/testkit/golden"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden files under testdata")

// ${VAR} expansion is the same wherever a value comes from: written in
// place, merged in (<<: *x, <<: [*x]) or aliased (*x), from an anchor in
// the same section or another; it follows where the value is used (server,
// audit, upstreams), not where its anchor sits, and *_env keys are never
// expanded. Each testdata/env_anchors/NAME.yaml is decoded and its values
// (or problems) compared with NAME.golden (go test -run TestEnvInAnchors
// ./config/ -update rewrites them).
func TestEnvInAnchors(t *testing.T) {
	env := map[string]string{"ANCHOR_HOST": "10.0.0.7", "ANCHOR_PORT": "18081", "ANCHOR_N": "4",
		"ANCHOR_DIR": "/var/lib/contractd", "ANCHOR_BOOL": "true", "ANCHOR_KEY": "sk-anchor-secret"}
	for k, v := range env {
		t.Setenv(k, v)
	}
	golden.Each(t, filepath.Join("testdata", "env_anchors", "*.yaml"), func(t *testing.T, f string, raw []byte) {
		var got strings.Builder
		p, err := ParseBytes(filepath.Base(f), raw)
		if err != nil {
			fmt.Fprintf(&got, "problems:\n%v\n", err)
		} else {
			dumpValues(&got, "", reflect.ValueOf(p.File).Elem())
		}
		if strings.Contains(got.String(), env["ANCHOR_KEY"]) {
			t.Errorf("the value of a variable an _env key names was printed:\n%s", got.String())
		}
		golden.Check(t, strings.TrimSuffix(f, ".yaml")+".golden", []byte(got.String()), *updateGolden, "-update")
	})
}

// dumpValues writes every set value under v, one "path: value" line each,
// by yaml key (raw YAML nodes are left out).
func dumpValues(w *strings.Builder, path string, v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			dumpValues(w, path, v.Elem())
		}
	case reflect.Struct:
		if v.Type() == nodeType {
			return
		}
		for i := 0; i < v.NumField(); i++ {
			tag := strings.Split(v.Type().Field(i).Tag.Get("yaml"), ",")[0]
			if tag != "" {
				dumpValues(w, join(path, tag), v.Field(i))
			}
		}
	case reflect.Slice:
		for i := 0; i < v.Len(); i++ {
			dumpValues(w, index(path, i), v.Index(i))
		}
	default:
		if d, ok := v.Interface().(time.Duration); ok && d != 0 {
			fmt.Fprintf(w, "%s: %v\n", path, d)
		} else if !v.IsZero() {
			fmt.Fprintf(w, "%s: %#v\n", path, v.Interface())
		}
	}
}
