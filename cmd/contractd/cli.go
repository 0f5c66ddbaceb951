package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"

	"github.com/contractd/contractd/config"
	"github.com/contractd/contractd/contracts"
)

// Exit codes.
const (
	exitOK      = 0
	exitProblem = 1
	exitUsage   = 2
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

const usage = `usage: contractd <command> [flags]

commands:
  serve     [-c FILE]                                   run the proxy
  validate  [-c FILE]                                   check a config; one "location: message" line per problem
  check     [-c FILE] (--contract NAME | --route NAME) [--input FILE] [OUTPUT|-]
                                                        judge a saved model output offline
  render    [-c FILE] --route NAME [--input FILE] [--api chat|responses] [--attempt N]
                                                        print the upstream request body of attempt N
  schema    [-c FILE] --route NAME                      print the JSON Schema the route's contract enforces
  replay    [-c FILE] (--reviews | --audit FILE) [--route NAME] [--since DURATION|RFC3339] [--live] [--json]
                                                        judge stored outputs again under the config
  version                                               print the version

The config is -c FILE, else $CONTRACTD_CONFIG, else ./contractd.yaml.
`

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	// CMD -h (or --help anywhere before --) prints the command's usage to
	// stdout and exits 0, as asked for, whatever else is on the line.
	if synopsis(args[0]) != "" && wantsHelp(args[1:]) {
		dispatch(ctx, []string{args[0], "-h"}, stdout, stdout)
		return exitOK
	}
	return dispatch(ctx, args, stdout, stderr)
}

func dispatch(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	switch args[0] {
	case "serve":
		return cmdServe(ctx, args[1:], stdout, stderr)
	case "validate":
		return cmdValidate(args[1:], stdout, stderr)
	case "check":
		return cmdCheck(args[1:], stdout, stderr)
	case "render":
		return cmdRender(args[1:], stdout, stderr)
	case "schema":
		return cmdSchema(args[1:], stdout, stderr)
	case "replay":
		return cmdReplay(ctx, args[1:], stdout, stderr)
	case "version", "--version", "-v":
		fmt.Fprintln(stdout, "contractd", buildVersion())
		return exitOK
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return exitOK
	}
	hint := ""
	for _, c := range []string{"serve", "validate", "check", "render", "schema", "replay", "version"} {
		if len(args[0]) >= 3 && (strings.HasPrefix(c, args[0]) || oneEditApart(args[0], c)) {
			hint = fmt.Sprintf(" (did you mean %q?)", c)
			break
		}
	}
	fmt.Fprintf(stderr, "contractd: unknown command %q%s\n\n%s", args[0], hint, usage)
	return exitUsage
}

// oneEditApart: a and b differ by one letter added, dropped, changed, or
// two neighbours swapped ("chek", "vaildate", "serv").
func oneEditApart(a, b string) bool {
	if len(a) > len(b) {
		a, b = b, a
	}
	switch len(b) - len(a) {
	case 0:
		i := 0
		for i < len(a) && a[i] == b[i] {
			i++
		}
		if i == len(a) {
			return false
		}
		return a[i+1:] == b[i+1:] || (i+1 < len(a) && a[i] == b[i+1] && a[i+1] == b[i] && a[i+2:] == b[i+2:])
	case 1:
		i := 0
		for i < len(a) && a[i] == b[i] {
			i++
		}
		return a[i:] == b[i+1:]
	}
	return false
}

// unexpectedArg is the usage error for a positional argument to a command
// that takes none; the config file given without -c says how to name it.
// parseFlagsOnly parses the arguments of a command that takes flags and
// no positional argument (serve, validate), saying on stderr what the
// first positional one is; false: the command ends with exitUsage (the
// flag package has already reported a bad flag).
func parseFlagsOnly(fs *flag.FlagSet, cmd string, args []string, stderr io.Writer) bool {
	pos, err := parseInterleaved(fs, args)
	if err == nil && len(pos) > 0 {
		fmt.Fprintln(stderr, unexpectedArg(cmd, pos[0]))
		return false
	}
	return err == nil
}

func unexpectedArg(cmd, arg string) string {
	msg := fmt.Sprintf("contractd %s: unexpected argument %q", cmd, arg)
	if strings.HasSuffix(arg, ".yaml") || strings.HasSuffix(arg, ".yml") || strings.HasSuffix(arg, ".json") {
		msg += fmt.Sprintf(" (the config is given as -c %s)", arg)
	}
	return msg
}

func buildVersion() string {
	if version != "dev" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return version
}

func wantsHelp(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "-h", "-help", "--help":
			return true
		}
	}
	return false
}

// synopsis is a command's line in the usage ("check [-c FILE] (--contract
// NAME | ...) ..."), "" for a command without flags or none at all.
func synopsis(name string) string {
	for _, l := range strings.Split(usage, "\n") {
		if rest, ok := strings.CutPrefix(l, "  "+name+" "); ok && strings.Contains(rest, "[-c FILE]") {
			rest, _, _ = strings.Cut(strings.TrimSpace(rest), "   ")
			return name + " " + rest
		}
	}
	return ""
}

func newFlags(name string, stderr io.Writer) (*flag.FlagSet, *string) {
	fs := flag.NewFlagSet("contractd "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: contractd %s\n\nflags:\n", synopsis(name))
		fs.PrintDefaults()
	}
	cfg := fs.String("c", "", "config file (default $CONTRACTD_CONFIG or ./contractd.yaml)")
	return fs, cfg
}

// parseInterleaved parses flags that may come after positional arguments
// (`check out.json --contract x`), as users type them.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "-" || !strings.HasPrefix(args[0], "-") {
			pos = append(pos, args[0])
			args = args[1:]
			if len(args) == 0 {
				return pos, nil
			}
			continue
		}
	}
}

func cmdValidate(args []string, stdout, stderr io.Writer) int {
	fs, cfg := newFlags("validate", stderr)
	if !parseFlagsOnly(fs, "validate", args, stderr) {
		return exitUsage
	}
	path := config.Resolve(*cfg)
	rt, err := config.Load(path)
	if err != nil {
		printLoadError(stdout, "", fmt.Errorf("%s: %w", path, notFoundAtDefault(*cfg, err)))
		return exitProblem
	}
	for _, w := range rt.Warnings {
		fmt.Fprintf(stderr, "warning: %s\n", w.String())
	}
	// What serve needs beyond a valid config: a config for check alone is
	// valid, and validate runs where the upstream keys may not be set (a
	// CI job), so these are warnings, not problems; but a validate that
	// passed silently before a serve that refused surprised everyone.
	if len(rt.Routes) == 0 {
		fmt.Fprintf(stderr, "warning: %s: no routes: serve needs at least one (check, render and schema need none)\n", path)
	}
	warned := map[string]bool{}
	for _, r := range rt.RouteList {
		u := r.Upstream
		if u == nil || u.APIKeyEnv == "" || warned[u.Name] {
			continue
		}
		if _, ok := os.LookupEnv(u.APIKeyEnv); !ok {
			warned[u.Name] = true
			fmt.Fprintf(stderr, "warning: %s: upstream %q: environment variable %s (api_key_env) is not set here: serve refuses to start without it\n", path, u.Name, u.APIKeyEnv)
		}
	}
	return exitOK
}

// notFoundAtDefault adds to a config not found at the default path (no
// -c, no $CONTRACTD_CONFIG) that it was the default, and how to name one:
// "contractd.yaml: cannot read config: file not found" alone left a first
// run guessing where contractd had looked and why. err is returned as is
// otherwise.
func notFoundAtDefault(flagPath string, err error) error {
	var ce *config.Error
	if _, isDefault := config.ResolveDefault(flagPath); !isDefault || !errors.Is(err, os.ErrNotExist) ||
		!errors.As(err, &ce) || len(ce.Problems) != 1 {
		return err
	}
	ce.Problems[0].Message += fmt.Sprintf(" (the default path, as neither -c FILE nor $%s names a config: name one with -c FILE)",
		config.EnvConfig)
	return err
}

// printLoadError prints why config.Load failed, each line after prefix:
// the config's problems one a line, as validate lists them, or else err.
func printLoadError(w io.Writer, prefix string, err error) {
	var ce *config.Error
	if errors.As(err, &ce) {
		for _, p := range ce.Problems {
			fmt.Fprintln(w, prefix+p.String())
		}
		return
	}
	fmt.Fprintf(w, "%s%v\n", prefix, err)
}

// loadForTool loads a config for check/render/schema: any problem is a
// usage failure (exit 2) printed to stderr. The server's secret variables
// (admin keys, review DSN, webhook secret, Redis URL) need not be set:
// these tools never serve.
func loadForTool(cmd, flagPath string, stderr io.Writer) (*config.Runtime, bool) {
	rt, err := config.LoadOffline(config.Resolve(flagPath))
	if err != nil {
		printLoadError(stderr, "contractd "+cmd+": ", notFoundAtDefault(flagPath, err))
		return nil, false
	}
	return rt, true
}

// toolRoute is render's and schema's start: --route NAME is required and
// nothing positional is allowed; it loads the config and looks the route
// up. A nil route means the usage failure is printed.
func toolRoute(cmd string, fs *flag.FlagSet, cfg, routeName *string, args []string, stderr io.Writer) *config.Route {
	if pos, err := parseInterleaved(fs, args); err != nil || len(pos) > 0 || *routeName == "" {
		if err == nil {
			fmt.Fprintf(stderr, "contractd %s: --route NAME is required; no positional arguments\n", cmd)
		}
		return nil
	}
	rt, ok := loadForTool(cmd, *cfg, stderr)
	if !ok {
		return nil
	}
	route := rt.Routes[*routeName]
	if route == nil {
		fmt.Fprintf(stderr, "contractd %s: unknown route %q\n", cmd, *routeName)
	}
	return route
}

type checkOutput struct {
	Valid      bool                  `json:"valid"`
	Violations []contracts.Violation `json:"violations"`
	Evidence   []contracts.Evidence  `json:"evidence"`
}

func cmdCheck(args []string, stdout, stderr io.Writer) int {
	fs, cfg := newFlags("check", stderr)
	contractName := fs.String("contract", "", "contract to judge against")
	routeName := fs.String("route", "", "judge with a route's contract and rendered prompt (enables prompt_leak)")
	inputPath := fs.String("input", "", "the input object (JSON) the output answers; evidence is looked up in it")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return exitUsage
	}
	if len(pos) > 1 || (*contractName == "") == (*routeName == "") {
		fmt.Fprintln(stderr, "contractd check: give --contract NAME or --route NAME, and at most one OUTPUT file (or - for stdin)")
		return exitUsage
	}
	rt, ok := loadForTool("check", *cfg, stderr)
	if !ok {
		return exitUsage
	}
	var k *contracts.Contract
	var route *config.Route
	if *routeName != "" {
		route = rt.Routes[*routeName]
		switch {
		case route == nil:
			fmt.Fprintf(stderr, "contractd check: unknown route %q\n", *routeName)
			return exitUsage
		case route.Passthrough:
			fmt.Fprintf(stderr, "contractd check: route %q is a passthrough route: it has no contract to judge with\n", *routeName)
			return exitUsage
		}
		k = route.Contract
	} else if k = rt.Contracts[*contractName]; k == nil {
		fmt.Fprintf(stderr, "contractd check: unknown contract %q\n", *contractName)
		return exitUsage
	}
	src := "-"
	if len(pos) == 1 {
		src = pos[0]
	}
	output, err := readArg(src)
	if err != nil {
		fmt.Fprintf(stderr, "contractd check: cannot read output: %v\n", err)
		return exitUsage
	}
	subj := &contracts.Subject{}
	var inputText string
	if *inputPath != "" {
		b, err := os.ReadFile(*inputPath)
		if err != nil {
			fmt.Fprintf(stderr, "contractd check: cannot read input: %v\n", cleanErr(err))
			return exitUsage
		}
		inputText = string(b)
		subj.LastUser, subj.HasLastUser = inputText, true
		if v, err := contracts.DecodeJSON(b); err == nil {
			subj.Input = v
		}
	}
	if route != nil {
		sys, err := renderSystemForCheck(route, subj, *inputPath != "")
		if err != nil {
			fmt.Fprintf(stderr, "contractd check: %v\n", err)
			return exitUsage
		}
		subj.SystemPrompt = sys
	}
	res := k.Check(string(output), subj)
	out := checkOutput{Valid: res.Valid, Violations: res.Violations, Evidence: res.Evidence}
	enc := json.NewEncoder(stdout)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	_ = enc.Encode(out)
	if res.Valid {
		return exitOK
	}
	return exitProblem
}

// renderSystemForCheck renders the route's system prompt with --input (or
// the prompt's example_input) so prompt_leak can be judged offline.
func renderSystemForCheck(r *config.Route, subj *contracts.Subject, haveInput bool) (string, error) {
	p := r.Prompt
	data := contracts.TemplateData{}
	switch {
	case haveInput && p.InputSchema != nil:
		data.Input = subj.Input
	case haveInput:
		data.Input = subj.LastUser
	case p.InputSchema != nil:
		data.Input = p.ExampleInput
		subj.Input = p.ExampleInput
	default:
		s, _ := p.ExampleInput.(string)
		data.Input = s
	}
	if subj.HasLastUser {
		data.Messages = []contracts.Message{{Role: "user", Content: subj.LastUser}}
	}
	s, err := p.RenderSystem(data)
	if err != nil {
		return "", fmt.Errorf("rendering the system prompt of route %q: %v", r.Name, err)
	}
	return s, nil
}

func readArg(name string) ([]byte, error) {
	if name == "-" {
		return io.ReadAll(io.LimitReader(os.Stdin, 64<<20))
	}
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, errors.New(cleanErr(err))
	}
	return b, nil
}

func cleanErr(err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Path + ": " + pe.Err.Error()
	}
	return err.Error()
}
