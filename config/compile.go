package config

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"iter"
	"log/slog"
	"maps"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/contractd/contractd/audit"
	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/policy"
	"github.com/contractd/contractd/retry"
)

// Load parses, validates and compiles a config file. On problems it returns
// an *Error listing every one; warnings ride on the Runtime.
func Load(path string) (*Runtime, error) {
	p, err := Parse(path)
	if err != nil {
		return nil, err
	}
	return p.Compile()
}

// LoadOffline is Load for the tools that judge outputs and render requests
// without serving (check, render, schema, replay of an audit file): the
// server's secret variables (admin_keys_env, review.dsn_env,
// review.webhook.secret_env, rate_limit.redis_url_env) may be unset, as
// they are on a CI runner or a laptop; every other problem still counts.
func LoadOffline(path string) (*Runtime, error) {
	p, err := Parse(path)
	if err != nil {
		return nil, err
	}
	return p.compile(true)
}

// LoadBytes is Load for config text already in memory.
func LoadBytes(path string, raw []byte) (*Runtime, error) {
	p, err := ParseBytes(path, raw)
	if err != nil {
		return nil, err
	}
	return p.Compile()
}

// Compile validates cross-references and builds the Runtime.
func (p *Parsed) Compile() (*Runtime, error) { return p.compile(false) }

func (p *Parsed) compile(offline bool) (*Runtime, error) {
	ps := &problems{file: p.Path, lines: p.lines}
	rt := &Runtime{
		Path:      p.Path,
		Upstreams: map[string]*Upstream{}, Labels: map[string][]string{},
		Prompts: map[string]*contracts.Prompt{}, Contracts: map[string]*contracts.Contract{},
		Routes: map[string]*Route{},
	}
	c := &compiler{p: p, ps: ps, rt: rt, schemaBytes: map[string][]byte{}}
	if abs, err := filepath.Abs(p.Path); err == nil {
		rt.Files = append(rt.Files, abs)
	}
	c.server()
	c.audit()
	c.review()
	c.upstreams()
	c.labels()
	c.prompts()
	c.contracts()
	c.routes()
	if !offline {
		ps.errs = append(ps.errs, ps.env...)
	}
	if len(ps.errs) > 0 {
		e := ps.error()
		e.Files = rt.Files
		return nil, e
	}
	rt.Warnings = slices.SortedStableFunc(slices.Values(ps.warns), compareProblems)
	rt.SHA256 = loadedSHA(p.Raw, c.schemaBytes)
	return rt, nil
}

// loadedSHA is the hash of what a Runtime was built from: the config
// file's bytes, then each schema_file's bytes once, in the order of their
// absolute paths, each preceded by its length (so no two sets of files
// hash alike by moving bytes from one to the next). A change to a schema
// file alone changes it, which the config's bytes alone would not.
func loadedSHA(raw []byte, schemas map[string][]byte) string {
	h := sha256.New()
	var n [8]byte
	write := func(b []byte) {
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	write(raw)
	for _, path := range slices.Sorted(maps.Keys(schemas)) {
		write(schemas[path])
	}
	return hex.EncodeToString(h.Sum(nil))
}

type compiler struct {
	p  *Parsed
	ps *problems
	rt *Runtime
	// contract schemas as decoded docs, for policy path checks
	schemaDocs map[string]any
	usedPrompt map[string]bool
	// schemaBytes: each schema_file's bytes as read, by absolute path,
	// for Runtime.SHA256.
	schemaBytes map[string][]byte
}

func (c *compiler) abs(path string) string {
	if filepath.IsAbs(path) {
		return path
	}
	return filepath.Join(c.p.Dir, path)
}

// whereRelative explains a relative path that was not found: where it
// was looked for, and, when the config was named through a symlink, that
// the directory is the one the config was named in, not the link's target
// (so a schema beside the target is not found; a Kubernetes ConfigMap's
// files are all links in one directory, and reload watches them there).
func (c *compiler) whereRelative(rel string, err error) string {
	if filepath.IsAbs(rel) || !errors.Is(err, fs.ErrNotExist) {
		return ""
	}
	msg := fmt.Sprintf(" (looked for %s: a relative path is relative to the directory of the config file", c.abs(rel))
	if fi, lerr := os.Lstat(c.p.Path); lerr == nil && fi.Mode()&fs.ModeSymlink != 0 {
		if target, terr := filepath.EvalSymlinks(c.p.Path); terr == nil {
			if a, aerr := filepath.Abs(target); aerr == nil {
				target = a
			}
			if _, serr := os.Stat(filepath.Join(filepath.Dir(target), rel)); serr == nil {
				msg += fmt.Sprintf(" as named, %s, not of the symlink's target, %s, where %s is: name the target with -c, or make the path absolute or relative to %s", c.p.Dir, filepath.Dir(target), rel, c.p.Dir)
			}
		}
	}
	return msg + ")"
}

// named yields the entries of a config list (key: upstreams, labels,
// prompts, contracts or routes) with their paths, passing over, with a
// problem, each one whose name is missing, invalid or an earlier entry's.
func named[T interface{ name() string }](c *compiler, key, kind string, list []T) iter.Seq2[string, T] {
	return func(yield func(string, T) bool) {
		seen := map[string]bool{}
		for i, d := range list {
			path := index(key, i)
			if c.checkName(seen, path, kind, d.name()) && !yield(path, d) {
				return
			}
		}
	}
}

// choice checks the enumerated setting key of the entry at path against
// the values allowed, the first of them its default: empty takes it, and
// any other value is reported as unknown, with the values to pick from.
func choice[T ~string](c *compiler, v *T, path, key string, allowed ...T) {
	switch {
	case *v == "":
		*v = allowed[0]
	case !slices.Contains(allowed, *v):
		names := make([]string, len(allowed))
		for i, a := range allowed {
			names[i] = string(a)
		}
		c.ps.add(join(path, key), "unknown %s %q (%s)", key, *v, strings.Join(names, ", "))
	}
}

// checkName validates and de-duplicates the names of one kind (seen: the
// names before it), adding a problem at path for a refused one.
func (c *compiler) checkName(seen map[string]bool, path, kind, name string) bool {
	switch {
	case name == "":
		c.ps.add(join(path, "name"), "%s needs a name", kind)
		return false
	case !policy.ValidName(name):
		c.ps.add(join(path, "name"), "invalid %s name %q (use letters, digits, '.', '_', '-')", kind, name)
		return false
	case seen[name]:
		c.ps.add(join(path, "name"), "duplicate %s name %q", kind, name)
		return false
	}
	seen[name] = true
	return true
}

func (c *compiler) server() {
	s := c.p.File.Server
	out := ServerSettings{
		Listen: s.Listen, MaxBodyBytes: s.MaxBodyBytes, RequestTimeout: s.RequestTimeout,
		APIKeysEnv: s.APIKeysEnv, AdminKeysEnv: s.AdminKeysEnv, RateLimit: s.RateLimit, ShutdownTimeout: s.ShutdownTimeout,
	}
	if out.Listen == "" {
		out.Listen = DefaultListen
	}
	if s.AdminListen != nil {
		out.AdminListen = *s.AdminListen
	}
	if out.MaxBodyBytes == 0 {
		out.MaxBodyBytes = DefaultMaxBodyBytes
	} else if out.MaxBodyBytes < 0 {
		c.ps.add("server.max_body_bytes", "must be positive")
	}
	if out.RequestTimeout == 0 {
		out.RequestTimeout = DefaultRequestTimeout
	}
	if out.ShutdownTimeout == 0 {
		out.ShutdownTimeout = DefaultShutdownTimeout
	}
	for _, e := range []struct{ key, v string }{{"api_keys_env", s.APIKeysEnv}, {"admin_keys_env", s.AdminKeysEnv}} {
		if e.v != "" && !envNameRE.MatchString(e.v) {
			c.ps.add("server."+e.key, "%q is not an environment variable name", e.v)
		} else if e.key == "admin_keys_env" && e.v != "" && !c.hasEnv(e.v) {
			// Fail closed: a named but empty admin key list must not open
			// the admin endpoints to everyone.
			c.ps.addEnv("server.admin_keys_env", "environment variable %s is not set", e.v)
		} else if e.key == "admin_keys_env" && e.v != "" && !holdsKey(os.Getenv(e.v)) {
			c.ps.addEnv("server.admin_keys_env", "environment variable %s holds no key (comma-separated keys)", e.v)
		} else if e.key == "api_keys_env" && e.v != "" && c.hasEnv(e.v) && !holdsKey(os.Getenv(e.v)) {
			// Unset or empty is no auth, as documented; set to separators
			// only ("${K1},${K2}" with both unset) is a key list gone
			// wrong, which must not open the API to everyone.
			c.ps.addEnv("server.api_keys_env", "environment variable %s holds no key (comma-separated keys; unset or empty serves without keys)", e.v)
		}
	}
	if s.RateLimit != nil {
		out.RateLimit = c.rateLimit(*s.RateLimit)
	}
	level, ok := logLevels[strings.ToLower(s.LogLevel)]
	if !ok {
		c.ps.add("server.log_level", "unknown level %q (debug, info, warn, error)", s.LogLevel)
	}
	out.LogLevel = level
	c.limits(s, &out)
	c.rt.Server = out
}

// logLevels are server.log_level's values (any case), "" the default.
var logLevels = map[string]slog.Level{
	"": slog.LevelInfo, "debug": slog.LevelDebug, "info": slog.LevelInfo, "warn": slog.LevelWarn, "error": slog.LevelError,
}

// limits reads the keys: absent or 0 is the default, negative an
// error. The in-flight budget must hold one body of max_body_bytes, or a
// request of that size could never be served.
func (c *compiler) limits(s Server, out *ServerSettings) {
	out.MaxConnections, out.MaxInflightBytes, out.BodyReadTimeout = s.MaxConnections, s.MaxInflightBytes, s.BodyReadTimeout
	switch {
	case out.MaxConnections == 0:
		out.MaxConnections = DefaultMaxConnections
	case out.MaxConnections < 0:
		c.ps.add("server.max_connections", "must be positive")
	}
	switch {
	case out.MaxInflightBytes == 0:
		out.MaxInflightBytes = DefaultMaxInflightBytes
	case out.MaxInflightBytes < 0:
		c.ps.add("server.max_inflight_bytes", "must be positive")
	}
	if out.MaxInflightBytes > 0 && out.MaxBodyBytes > 0 && out.MaxInflightBytes < out.MaxBodyBytes {
		if c.p.File.Server.MaxInflightBytes == 0 {
			// Not written: name the key the user wrote, and the default it
			// ran into.
			c.ps.add("server.max_body_bytes", "must be at most max_inflight_bytes (default %d): a body that size could never be served; set server.max_inflight_bytes to at least %d", out.MaxInflightBytes, out.MaxBodyBytes)
		} else {
			c.ps.add("server.max_inflight_bytes", "must be at least max_body_bytes (%d): a body that size could never be served", out.MaxBodyBytes)
		}
	}
	if out.BodyReadTimeout == 0 {
		out.BodyReadTimeout = DefaultBodyReadTimeout
	}
	if out.BodyReadTimeout > out.RequestTimeout {
		if s.BodyReadTimeout != 0 {
			c.ps.warn("server.body_read_timeout", "longer than request_timeout (%s), which bounds the body read too", out.RequestTimeout)
		}
		out.BodyReadTimeout = out.RequestTimeout
	}
	ml, err := ParseMemoryLimit(s.MemoryLimit)
	if err != nil {
		c.ps.add("server.memory_limit", "%v", err)
	}
	out.MemoryLimit = ml
}

// ParseMemoryLimit reads server.memory_limit: "" or "auto", "off", or a
// size in bytes with an optional unit (B, KiB, MiB, GiB, TiB, KB, MB, GB,
// TB), e.g. 512MiB.
func ParseMemoryLimit(v string) (MemoryLimit, error) {
	v = strings.TrimSpace(v)
	switch strings.ToLower(v) {
	case "", "auto":
		return MemoryLimit{Auto: true}, nil
	case "off":
		return MemoryLimit{}, nil
	}
	n, err := ParseSize(v)
	if err != nil {
		return MemoryLimit{}, fmt.Errorf("%q is not auto, off or a size such as 512MiB", v)
	}
	if n < 16<<20 {
		return MemoryLimit{}, fmt.Errorf("%q is below 16MiB, too small for the process to run", v)
	}
	return MemoryLimit{Bytes: n}, nil
}

var sizeUnits = map[string]int64{"": 1, "b": 1, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
	"kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12}

// ParseSize reads a byte count with an optional unit (512MiB, 2GB, 1048576).
func ParseSize(v string) (int64, error) {
	i := strings.IndexFunc(v, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	if i < 0 {
		i = len(v)
	}
	num, unit := v[:i], strings.ToLower(strings.TrimSpace(v[i:]))
	mul, ok := sizeUnits[unit]
	f, err := strconv.ParseFloat(num, 64)
	if !ok || err != nil || f <= 0 || f*float64(mul) > math.MaxInt64/2 {
		return 0, fmt.Errorf("bad size %q", v)
	}
	return int64(f * float64(mul)), nil
}

// rateLimit applies the defaults to server.rate_limit. The Redis URL is
// checked for its scheme only (it may hold a password: never echoed).
func (c *compiler) rateLimit(rl RateLimit) *RateLimit {
	if rl.RequestsPerSecond <= 0 || rl.Burst < 0 {
		c.ps.add("server.rate_limit", "requests_per_second must be positive and burst not negative")
	}
	switch rl.Store {
	case "":
		rl.Store = RateLimitMemory
		fallthrough
	case RateLimitMemory:
		if rl.RedisURLEnv != "" {
			c.ps.add("server.rate_limit.redis_url_env", "redis_url_env is only used with store: redis")
		}
		if rl.Timeout != 0 {
			c.ps.add("server.rate_limit.timeout", "timeout is only used with store: redis")
		}
	case RateLimitRedis:
		if rl.RedisURLEnv == "" {
			rl.RedisURLEnv = DefaultRedisURLEnv
		}
		if rl.Timeout == 0 {
			rl.Timeout = DefaultRateLimitTimeout
		}
		const key = "server.rate_limit.redis_url_env"
		switch u, err := url.Parse(os.Getenv(rl.RedisURLEnv)); {
		case !envNameRE.MatchString(rl.RedisURLEnv):
			c.ps.add(key, "%q is not an environment variable name", rl.RedisURLEnv)
		case !c.hasEnv(rl.RedisURLEnv):
			c.ps.addEnv(key, "environment variable %s is not set", rl.RedisURLEnv)
		case err != nil || (u.Scheme != "redis" && u.Scheme != "rediss" && u.Scheme != "unix"):
			c.ps.addEnv(key, "environment variable %s does not hold a redis://, rediss:// or unix:// URL", rl.RedisURLEnv)
		}
	default:
		c.ps.add("server.rate_limit.store", "unknown store %q (memory, redis)", rl.Store)
	}
	return &rl
}

func (c *compiler) audit() {
	a := c.p.File.Audit
	out := AuditSettings{Sink: audit.SinkKind(a.Sink), IncludeContent: a.IncludeContent}
	switch out.Sink {
	case "":
		out.Sink = audit.SinkStdout
	case audit.SinkStdout, audit.SinkNone:
	case audit.SinkFile:
		if a.Path == "" {
			c.ps.add("audit.path", "sink file needs a path")
		}
	default:
		c.ps.add("audit.sink", "unknown sink %q (stdout, file, none)", a.Sink)
	}
	if a.Path != "" {
		if out.Sink != audit.SinkFile {
			c.ps.add("audit.path", "path is only used with sink: file")
		}
		out.Path = c.abs(a.Path)
	}
	c.rt.Audit = out
}

func (c *compiler) review() {
	r := c.p.File.Review
	out := ReviewSettings{Store: ReviewStore(r.Store), Retention: r.Retention, DSNEnv: r.DSNEnv}
	if out.Store == "" {
		out.Store = ReviewSQLite
	}
	if out.Retention == 0 {
		out.Retention = DefaultReviewRetention
	}
	out.DedupeWindow = DefaultDedupeWindow
	if d := r.DedupeWindow; d != nil {
		out.DedupeWindow = *d // the parser refuses negative durations
	}
	envSet := func(key, name string) {
		switch {
		case !envNameRE.MatchString(name):
			c.ps.add(key, "%q is not an environment variable name", name)
		case !c.hasEnv(name):
			c.ps.addEnv(key, "environment variable %s is not set", name)
		}
	}
	switch out.Store {
	case ReviewSQLite:
		p := r.Path
		if p == "" {
			p = DefaultReviewPath
		}
		out.Path = c.abs(p)
		out.SpoolPath = filepath.Join(filepath.Dir(out.Path), ReviewSpoolFile)
		if r.DSNEnv != "" {
			c.ps.add("review.dsn_env", "dsn_env is only used with store: postgres")
		}
	case ReviewPostgres:
		if r.Path != "" {
			c.ps.add("review.path", "path is only used with store: sqlite")
		}
		if out.DSNEnv == "" {
			out.DSNEnv = DefaultReviewDSNEnv
		}
		envSet("review.dsn_env", out.DSNEnv)
		if c.hasEnv(out.DSNEnv) && !looksLikeDSN(os.Getenv(out.DSNEnv)) {
			// Never quote the value: it holds the database password.
			c.ps.addEnv("review.dsn_env", "environment variable %s does not hold a PostgreSQL DSN (postgres://… or key=value pairs)", out.DSNEnv)
		}
		out.SpoolPath = filepath.Join(c.p.Dir, ReviewSpoolFile)
	case ReviewNone:
		if r.Path != "" || r.DSNEnv != "" {
			c.ps.add("review.store", "store none keeps nothing: remove path and dsn_env")
		}
	default:
		c.ps.add("review.store", "unknown store %q (sqlite, postgres, none)", r.Store)
	}
	if w := r.Webhook; w != nil {
		u, err := url.Parse(w.URL)
		switch {
		case w.URL == "":
			c.ps.add("review.webhook.url", "webhook needs a url")
		case err != nil:
			// Not quoted: the text may hold a password (user:pw@host).
			c.ps.add("review.webhook.url", "not a URL")
		case (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
			c.ps.add("review.webhook.url", "%q is not an http(s) URL", u.Redacted())
		case u.User != nil:
			c.ps.add("review.webhook.url", "url must not carry credentials")
		}
		if w.SecretEnv == "" {
			c.ps.add("review.webhook.secret_env", "webhook needs secret_env (the variable holding the signing secret)")
		} else {
			envSet("review.webhook.secret_env", w.SecretEnv)
		}
		if out.Store == ReviewNone {
			c.ps.add("review.webhook", "webhook needs a store (its pending deliveries live there)")
		}
		out.Webhook = &WebhookSettings{URL: w.URL, SecretEnv: w.SecretEnv}
	}
	c.rt.Review = out
}

// holdsKey reports whether a comma-separated key list holds a key.
func holdsKey(list string) bool {
	for k := range strings.SplitSeq(list, ",") {
		if strings.TrimSpace(k) != "" {
			return true
		}
	}
	return false
}

// hasEnv reports whether an environment variable is set (and not empty).
func (c *compiler) hasEnv(name string) bool {
	v, ok := os.LookupEnv(name)
	return ok && v != ""
}

func (c *compiler) upstreams() {
	for path, u := range named(c, "upstreams", "upstream", c.p.File.Upstreams) {
		out := &Upstream{Name: u.Name, APIKeyEnv: u.APIKeyEnv, Timeout: u.Timeout,
			MaxRetries: DefaultMaxRetries, MaxTokensParam: TokensParam(u.MaxTokensParam), MaxConcurrency: u.MaxConcurrency}
		pu, err := url.Parse(u.BaseURL)
		switch {
		case u.BaseURL == "":
			c.ps.add(join(path, "base_url"), "base_url is required")
		case err != nil:
			// Not quoted: the text may hold a password (user:pw@host).
			c.ps.add(join(path, "base_url"), "base_url must be an http(s) URL")
		case (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "":
			c.ps.add(join(path, "base_url"), "base_url must be an http(s) URL, got %q", pu.Redacted())
		case pu.User != nil:
			c.ps.add(join(path, "base_url"), "base_url must not carry credentials; use api_key_env")
		}
		out.BaseURL = strings.TrimRight(u.BaseURL, "/")
		if cu, err := parseRequestURL(out.BaseURL + "/chat/completions"); err == nil {
			out.chatURL = cu
		}
		if out.Timeout == 0 {
			out.Timeout = DefaultUpstreamTimeout
		}
		if u.MaxRetries != nil {
			if *u.MaxRetries < 0 || *u.MaxRetries > 10 {
				c.ps.add(join(path, "max_retries"), "must be between 0 and 10")
			}
			out.MaxRetries = *u.MaxRetries
		}
		switch out.MaxTokensParam {
		case "":
			out.MaxTokensParam = MaxTokens
		case MaxTokens, MaxCompletionTokens:
		default:
			c.ps.add(join(path, "max_tokens_param"), "must be max_tokens or max_completion_tokens, got %q", u.MaxTokensParam)
		}
		if u.MaxConcurrency < 0 {
			c.ps.add(join(path, "max_concurrency"), "must not be negative")
		}
		if u.APIKeyEnv != "" && !envNameRE.MatchString(u.APIKeyEnv) {
			c.ps.add(join(path, "api_key_env"), "%q is not an environment variable name", u.APIKeyEnv)
		}
		c.rt.Upstreams[u.Name] = out
	}
}

var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func (c *compiler) labels() {
	for path, l := range named(c, "labels", "label set", c.p.File.Labels) {
		if len(l.Values) == 0 {
			c.ps.add(join(path, "values"), "label set %q has no values", l.Name)
		}
		dup := map[string]bool{}
		for j, v := range l.Values {
			if dup[v] {
				c.ps.add(index(join(path, "values"), j), "duplicate label %q", v)
			}
			dup[v] = true
		}
		c.rt.Labels[l.Name] = slices.Clone(l.Values)
	}
}

func (c *compiler) labelSource() contracts.LabelSource {
	return func(name string) ([]string, bool) {
		v, ok := c.rt.Labels[name]
		return v, ok
	}
}

func (c *compiler) prompts() {
	for path, d := range named(c, "prompts", "prompt", c.p.File.Prompts) {
		if strings.TrimSpace(d.System) == "" {
			c.ps.add(join(path, "system"), "prompt %q needs a system template", d.Name)
			continue
		}
		p, err := contracts.ParsePrompt(d.Name, d.System, d.User, c.labelSource())
		if err != nil {
			c.ps.add(path, "template does not parse: %v", err)
			continue
		}
		if d.InputSchema.Kind != 0 {
			doc, err := nodeJSON(&d.InputSchema)
			if err == nil {
				p.InputSchema, err = contracts.CompileSchema(doc)
			}
			if err != nil {
				c.ps.add(join(path, "input_schema"), "%v", err)
			} else {
				c.dialectWarnings(join(path, "input_schema"), p.InputSchema)
			}
		}
		if d.ExampleInput.Kind != 0 {
			doc, err := nodeJSON(&d.ExampleInput)
			if err == nil {
				err = json.Unmarshal(doc, &p.ExampleInput)
			}
			if err != nil {
				c.ps.add(join(path, "example_input"), "%v", err)
			} else if p.InputSchema != nil {
				v, _ := contracts.DecodeJSON(doc)
				if vs := p.InputSchema.Validate(v); len(vs) > 0 {
					vs = contracts.SortViolations(vs)
					c.ps.add(join(path, "example_input"), "does not match input_schema: %s %s: %s", vs[0].Path, vs[0].Rule, vs[0].Message)
				}
				p.ExampleInput = v
			}
		} else if p.InputSchema != nil {
			c.ps.add(join(path, "example_input"), "a prompt with input_schema needs example_input (validate renders it)")
		}
		c.rt.Prompts[d.Name] = p
	}
}

func (c *compiler) contracts() {
	c.schemaDocs = map[string]any{}
	for path, d := range named(c, "contracts", "contract", c.p.File.Contracts) {
		var doc []byte
		var err error
		schemaPath := join(path, "schema")
		switch {
		case d.SchemaFile != "" && d.Schema.Kind != 0:
			c.ps.add(path, "give schema_file or schema, not both")
			continue
		case d.SchemaFile != "":
			schemaPath = join(path, "schema_file")
			c.rt.Files = append(c.rt.Files, c.abs(d.SchemaFile))
			doc, err = os.ReadFile(c.abs(d.SchemaFile))
			if err != nil {
				c.ps.add(schemaPath, "cannot read %s: %s%s", d.SchemaFile, cleanOSError(err), c.whereRelative(d.SchemaFile, err))
				continue
			}
			c.schemaBytes[c.abs(d.SchemaFile)] = doc
		case d.Schema.Kind != 0:
			if doc, err = nodeJSON(&d.Schema); err != nil {
				c.ps.add(schemaPath, "%v", err)
				continue
			}
		default:
			c.ps.add(path, "contract %q needs schema_file or schema", d.Name)
			continue
		}
		s, err := contracts.CompileSchema(doc)
		if err != nil {
			c.ps.add(schemaPath, "%v", err)
			continue
		}
		k := &contracts.Contract{Name: d.Name, Schema: s, Mode: contracts.Mode(d.Extraction),
			Limits: contracts.Limits{MaxBytes: d.MaxOutputBytes, MaxDepth: contracts.DefaultMaxDepth}}
		choice(c, &k.Mode, path, "extraction", contracts.ModeStrict, contracts.ModeLenient, contracts.ModeRepair)
		if k.Limits.MaxBytes == 0 {
			k.Limits.MaxBytes = DefaultMaxOutputBytes
		} else if k.Limits.MaxBytes < 0 {
			c.ps.add(join(path, "max_output_bytes"), "must be positive")
		}
		sdoc := s.Doc()
		// lenient's {"text": "..."} wrapper is the output itself when the
		// contract declares a top-level text, also through a root $ref.
		k.HasTextProperty = policy.DeclaresProperty(sdoc, "text")
		if t, _ := sdoc["type"].(string); t != "" && t != "object" {
			c.ps.add(schemaPath, "a contract schema must describe an object (type %q can never be accepted)", t)
		}
		for _, ptr := range openObjects(sdoc, "") {
			c.ps.warn(schemaPath, "object schema at %q allows extra keys (set additionalProperties: false)", "#"+ptr)
		}
		if len(s.UnknownFormats) > 0 {
			c.ps.warn(schemaPath, "unknown format(s) %s are annotations only, not checked", strings.Join(s.UnknownFormats, ", "))
		}
		c.dialectWarnings(schemaPath, s)
		k.Policies = c.policies(join(path, "policies"), d.Policies, sdoc)
		k.Prepare()
		k.SHA256 = contractSHA(s.JSON(), d)
		c.rt.Contracts[d.Name] = k
	}
}

// dialectWarnings reports keywords a schema's declared draft does not
// have (ignored, or read under an older spelling).
func (c *compiler) dialectWarnings(path string, s *contracts.Schema) {
	for _, w := range s.DialectWarnings {
		c.ps.warn(path, "%s", w)
	}
}

func contractSHA(schema []byte, d ContractDef) string {
	settings, _ := json.Marshal(struct {
		Extraction     string
		MaxOutputBytes int
		Policies       Policies
	}{d.Extraction, d.MaxOutputBytes, d.Policies})
	h := sha256.New()
	h.Write(schema)
	h.Write([]byte{0})
	h.Write(settings)
	return hex.EncodeToString(h.Sum(nil))
}

func (c *compiler) policies(path string, p Policies, schema map[string]any) []contracts.Policy {
	var out []contracts.Policy
	var sdoc any = schema
	if schema == nil {
		sdoc = true
	}
	checkPath := func(at, ptr string) bool {
		pp, err := policy.ParsePath(ptr)
		if err != nil {
			c.ps.add(at, "%v", err)
			return false
		}
		if !pp.CanMatchSchema(sdoc) {
			c.ps.add(at, "path %q cannot match anything the schema allows", ptr)
			return false
		}
		if !pp.CanMatchStringInSchema(sdoc) {
			c.ps.add(at, "path %q cannot match a string the schema allows (policies judge strings; for an array's items use %s/*)", ptr, strings.TrimSuffix(ptr, "/"))
			return false
		}
		return true
	}
	add := func(at string, pol contracts.Policy, err error) {
		if err != nil {
			c.ps.add(at, "%v", err)
			return
		}
		out = append(out, pol)
	}
	for i, l := range p.Labels {
		at := index(join(path, "labels"), i)
		vals, ok := c.rt.Labels[l.Set]
		if !ok {
			c.ps.add(join(at, "set"), "unknown label set %q (%s)", l.Set, suggestName(l.Set, slices.Collect(maps.Keys(c.rt.Labels))))
			continue
		}
		if checkPath(join(at, "path"), l.Path) {
			pol, err := policy.NewLabels(l.Path, l.Set, vals)
			add(at, pol, err)
		}
	}
	for i, e := range p.Evidence {
		at := index(join(path, "evidence"), i)
		if checkPath(join(at, "path"), e.Path) {
			pol, err := policy.NewEvidence(e.Path, e.Source)
			add(at, pol, err)
		}
	}
	for i, q := range p.Questions {
		at := index(join(path, "questions"), i)
		if (q.Exactly == nil) == (q.Max == nil) {
			c.ps.add(at, "give exactly one of exactly or max")
			continue
		}
		if checkPath(join(at, "path"), q.Path) {
			pol, err := policy.NewQuestions(q.Path, q.Exactly, q.Max)
			add(at, pol, err)
		}
	}
	names := map[string]bool{}
	for i, f := range p.Forbidden {
		at := index(join(path, "forbidden"), i)
		if names[f.Name] {
			c.ps.add(join(at, "name"), "duplicate forbidden name %q", f.Name)
		}
		names[f.Name] = true
		re, err := regexp.Compile(f.Pattern)
		if err != nil {
			c.ps.add(join(at, "pattern"), "bad regex: %v", err)
			continue
		}
		if checkPath(join(at, "path"), f.Path) {
			pol, err := policy.NewForbidden(f.Name, f.Path, re)
			add(at, pol, err)
		}
	}
	if p.PromptLeak {
		out = append(out, policy.NewPromptLeak())
	}
	return out
}

// openObjects lists schema locations of object schemas that accept
// undeclared keys, for the extra-keys warning.
func openObjects(s map[string]any, at string) []string {
	if s == nil {
		return nil
	}
	var out []string
	_, hasProps := s["properties"]
	t, _ := s["type"].(string)
	if hasProps || t == "object" {
		ap, hasAP := s["additionalProperties"]
		up, hasUP := s["unevaluatedProperties"]
		closed := (hasAP && ap == false) || (hasUP && up == false)
		if !closed && !(hasAP && isSchemaObject(ap)) {
			out = append(out, at)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(s)) {
		switch v := s[k].(type) {
		case map[string]any:
			switch k {
			case "properties", "$defs", "definitions", "patternProperties", "dependentSchemas":
				sub := make([]string, 0, len(v))
				for n := range v {
					sub = append(sub, n)
				}
				slices.Sort(sub)
				for _, n := range sub {
					if m, ok := v[n].(map[string]any); ok {
						out = append(out, openObjects(m, at+"/"+k+"/"+contracts.EscapePointerToken(n))...)
					}
				}
			// if/then/else/not/contains hold partial schemas that must stay
			// open (closing an `if` changes what it matches): not warned.
			case "items", "additionalProperties", "unevaluatedProperties", "unevaluatedItems":
				out = append(out, openObjects(v, at+"/"+k)...)
			}
		case []any:
			switch k {
			case "anyOf", "oneOf", "prefixItems":
				for i, x := range v {
					if m, ok := x.(map[string]any); ok {
						out = append(out, openObjects(m, fmt.Sprintf("%s/%s/%d", at, k, i))...)
					}
				}
			}
		}
	}
	return out
}

func isSchemaObject(v any) bool { _, ok := v.(map[string]any); return ok }

func (c *compiler) routes() {
	used := map[string]bool{}
	for path, d := range named(c, "routes", "route", c.p.File.Routes) {
		r := &Route{Name: d.Name, Model: d.Model, Passthrough: d.Passthrough}
		up, ok := c.rt.Upstreams[d.Upstream]
		switch {
		case d.Upstream == "":
			c.ps.add(join(path, "upstream"), "route %q needs an upstream", d.Name)
		case !ok:
			c.ps.add(join(path, "upstream"), "unknown upstream %q (%s)", d.Upstream, suggestName(d.Upstream, slices.Collect(maps.Keys(c.rt.Upstreams))))
		}
		r.Upstream = up
		if d.Model == "" {
			c.ps.add(join(path, "model"), "route %q needs a model", d.Name)
		}
		if d.Passthrough {
			for _, k := range []struct {
				key string
				set bool
			}{{"prompt", d.Prompt != ""}, {"contract", d.Contract != ""}, {"temperature", d.Temperature != nil},
				{"retry", d.Retry != nil}, {"response_format", d.ResponseFormat != ""}, {"client_system", d.ClientSystem != ""},
				{"seed", d.Seed != nil}, {"max_output_tokens", d.MaxOutputTokens != 0}, {"budget", d.Budget != (BudgetDef{})}} {
				if k.set {
					c.ps.add(join(path, k.key), "passthrough routes forward requests untouched; %s does not apply", k.key)
				}
			}
			c.rt.Routes[d.Name] = r
			c.rt.RouteList = append(c.rt.RouteList, r)
			continue
		}
		c.contractRoute(path, d, r, used)
		c.rt.Routes[d.Name] = r
		c.rt.RouteList = append(c.rt.RouteList, r)
	}
	for _, d := range c.p.File.Prompts {
		if _, ok := c.rt.Prompts[d.Name]; ok && !used[d.Name] {
			for i := range c.p.File.Prompts {
				if c.p.File.Prompts[i].Name == d.Name {
					c.ps.warn(index("prompts", i), "prompt %q is not used by any route", d.Name)
				}
			}
		}
	}
}

func (c *compiler) contractRoute(path string, d RouteDef, r *Route, used map[string]bool) {
	prompt, pok := reference(c, c.rt.Prompts, path, d.Name, "prompt", d.Prompt)
	used[d.Prompt] = true
	contract, cok := reference(c, c.rt.Contracts, path, d.Name, "contract", d.Contract)
	r.Contract = contract
	if d.Temperature == nil {
		c.ps.add(join(path, "temperature"), "temperature is required on contract routes")
	} else {
		r.Temperature = *d.Temperature
		checkTemp(c.ps, join(path, "temperature"), r.Temperature)
	}
	r.MaxOutputTokens = d.MaxOutputTokens
	if r.MaxOutputTokens == 0 {
		r.MaxOutputTokens = DefaultMaxOutputTokens
	} else if r.MaxOutputTokens < 0 {
		c.ps.add(join(path, "max_output_tokens"), "must be positive")
	}
	r.Seed = d.Seed
	r.ResponseFormat = ResponseFormat(d.ResponseFormat)
	choice(c, &r.ResponseFormat, path, "response_format", ResponseFormatNone, ResponseFormatJSONObject, ResponseFormatJSONSchema)
	r.ClientSystem = ClientSystem(d.ClientSystem)
	choice(c, &r.ClientSystem, path, "client_system", ClientSystemReject, ClientSystemDrop)
	if d.Budget.MaxInputTokens < 0 || d.Budget.MaxTotalTokens < 0 {
		c.ps.add(join(path, "budget"), "budgets must not be negative")
	}
	r.Budget = retry.Budget{MaxInputTokens: d.Budget.MaxInputTokens, MaxTotalTokens: d.Budget.MaxTotalTokens}
	if r.MaxOutputTokens > 0 && r.Budget.MaxTotalTokens > 0 && r.Budget.MaxTotalTokens <= r.MaxOutputTokens {
		c.ps.warn(join(join(path, "budget"), "max_total_tokens"),
			"%d leaves no room for attempt 1: an attempt runs only when its input plus max_output_tokens (%d) fit in it, so every request ends in 422 budget_exhausted without calling the upstream; raise it or lower max_output_tokens",
			r.Budget.MaxTotalTokens, r.MaxOutputTokens)
	}
	if d.Retry == nil {
		r.Plan = retry.DefaultPlan(r.Temperature)
	} else if len(d.Retry) == 0 {
		c.ps.add(join(path, "retry"), "retry needs at least one attempt (omit it for the default)")
	}
	for i, a := range d.Retry {
		at := index(join(path, "retry"), i)
		if a.Temperature == nil {
			c.ps.add(join(at, "temperature"), "each attempt needs a temperature")
			continue
		}
		checkTemp(c.ps, join(at, "temperature"), *a.Temperature)
		att := retry.Attempt{Temperature: *a.Temperature}
		if a.Shorten != nil {
			s := retry.Shorten{Ratio: a.Shorten.Ratio, Keep: retry.Keep(a.Shorten.Keep)}
			if s.Keep == "" {
				s.Keep = retry.KeepHead
			}
			if err := s.Validate(); err != nil {
				c.ps.add(join(at, "shorten"), "%v", err)
			}
			att.Shorten = &s
		}
		r.Plan = append(r.Plan, att)
	}
	if d.Temperature != nil && len(d.Retry) > 0 && d.Retry[0].Temperature != nil && *d.Retry[0].Temperature != *d.Temperature {
		c.ps.warn(join(path, "temperature"), "%v is not used: with retry, attempt 1 runs at retry[0].temperature (%v); set the two equal",
			*d.Temperature, *d.Retry[0].Temperature)
	}
	if !pok || !cok {
		return
	}
	r.Prompt = prompt.Bind(contract.Schema.JSON())
	r.ResponseFormatJSON = responseFormatJSON(r.ResponseFormat, contract)
	if r.ResponseFormat == ResponseFormatJSONSchema {
		if opt := optionalProperties(contract.Schema.JSON()); len(opt) > 0 {
			c.ps.warn(join(path, "response_format"), "json_schema sends contract %q with strict: true, and OpenAI's structured outputs refuse a strict schema that leaves properties optional (%s): every request would fail (OpenAI answers 400, contractd 502 upstream_error); list them in required (nullable where they may be absent), or use json_object with OpenAI",
				d.Contract, strings.Join(opt, ", "))
		}
	}
	c.evidenceSources(path, prompt, d.Contract)
	c.renderExample(path, r)
}

var schemaNameRE = regexp.MustCompile(`[^A-Za-z0-9_-]`)

// responseFormatJSON is the response_format member's value the upstream
// body carries for f: json_schema sends k's schema, strict, under k's
// name made what OpenAI accepts ([A-Za-z0-9_-]{1,64}).
func responseFormatJSON(f ResponseFormat, k *contracts.Contract) []byte {
	switch f {
	case ResponseFormatJSONObject:
		return []byte(`{"type":"json_object"}`)
	case ResponseFormatJSONSchema:
		name := schemaNameRE.ReplaceAllString(k.Name, "_")
		if len(name) > 64 {
			name = name[:64]
		}
		b := []byte(`{"type":"json_schema","json_schema":{"name":"`)
		b = append(b, name...) // nothing in it needs quoting
		b = append(b, `","strict":true,"schema":`...)
		b = append(b, k.Schema.JSON()...)
		return append(b, `}}`...)
	}
	return nil
}

// optionalProperties lists, as JSON Pointers, the properties of every
// object (sub)schema of a compact schema that its required list leaves
// out: what OpenAI's strict structured outputs refuse. At most 5, then
// "…".
func optionalProperties(schema []byte) []string {
	var root any
	if json.Unmarshal(schema, &root) != nil {
		return nil
	}
	var out []string
	var walk func(ptr string, n any)
	walk = func(ptr string, n any) {
		switch v := n.(type) {
		case map[string]any:
			if props, ok := v["properties"].(map[string]any); ok {
				req := map[string]bool{}
				if rl, ok := v["required"].([]any); ok {
					for _, x := range rl {
						if s, ok := x.(string); ok {
							req[s] = true
						}
					}
				}
				for _, name := range slices.Sorted(maps.Keys(props)) {
					if !req[name] {
						out = append(out, "#"+ptr+"/properties/"+contracts.EscapePointerToken(name))
					}
				}
			}
			for _, k := range slices.Sorted(maps.Keys(v)) {
				if k == "enum" || k == "const" || k == "default" || k == "examples" {
					continue // values, not schemas
				}
				walk(ptr+"/"+contracts.EscapePointerToken(k), v[k])
			}
		case []any:
			for i, x := range v {
				walk(ptr+"/"+strconv.Itoa(i), x)
			}
		}
	}
	walk("", root)
	if len(out) > 5 {
		out = append(out[:5], "…")
	}
	return out
}

// evidenceSources checks, for a route whose prompt has an input_schema,
// that each evidence source of its contract can address a string in that
// schema: a source that cannot (a typo, a number member) fails the evidence
// of every request on the route. The contract alone cannot be checked, as
// routes with different prompts may share it; a prompt without
// input_schema has no input object to check against.
func (c *compiler) evidenceSources(path string, prompt *contracts.Prompt, contract string) {
	if prompt.InputSchema == nil {
		return
	}
	for i, d := range c.p.File.Contracts {
		if d.Name != contract {
			continue
		}
		for j, e := range d.Policies.Evidence {
			if e.Source == "" {
				continue
			}
			sp, err := policy.ParsePath(e.Source)
			if err != nil {
				continue // the contract reports it
			}
			if !sp.CanMatchStringInSchema(prompt.InputSchema.Doc()) {
				c.ps.add(join(path, "contract"), "evidence source %q (contracts[%d].policies.evidence[%d]) cannot match a string that prompt %q's input_schema allows",
					e.Source, i, j, prompt.Name)
			}
		}
	}
}

// reference resolves a contract route's prompt or contract by name,
// reporting a missing or unknown one (a defined one that failed to compile
// already has its own problem).
func reference[T any](c *compiler, defined map[string]T, path, route, kind, name string) (T, bool) {
	v, ok := defined[name]
	switch {
	case name == "":
		c.ps.add(join(path, kind), "contract route %q needs a %s (or passthrough: true)", route, kind)
	case !ok && !c.definedButBroken(kind+"s", name):
		c.ps.add(join(path, kind), "unknown %s %q (%s)", kind, name, suggestName(name, slices.Collect(maps.Keys(defined))))
	}
	return v, ok
}

// definedButBroken tells whether a name was defined but failed to compile
// (its own problem is already reported; don't add "unknown").
func (c *compiler) definedButBroken(kind, name string) bool {
	switch kind {
	case "prompts":
		return slices.ContainsFunc(c.p.File.Prompts, func(p PromptDef) bool { return p.Name == name })
	case "contracts":
		return slices.ContainsFunc(c.p.File.Contracts, func(k ContractDef) bool { return k.Name == name })
	}
	return false
}

func checkTemp(ps *problems, path string, t float64) {
	if t < 0 || t > 2 {
		ps.add(path, "temperature must be between 0 and 2, got %g", t)
	}
}

// renderExample renders the route's templates with the prompt's example
// input, as validate promises.
func (c *compiler) renderExample(path string, r *Route) {
	p := r.Prompt
	data := contracts.TemplateData{Input: p.ExampleInput}
	if p.InputSchema == nil {
		text, _ := p.ExampleInput.(string)
		data.Input = text
		data.Messages = []contracts.Message{{Role: "user", Content: text}}
	} else {
		b, _ := json.Marshal(p.ExampleInput)
		data.Messages = []contracts.Message{{Role: "user", Content: string(b)}}
	}
	if _, err := p.RenderSystem(data); err != nil {
		c.ps.add(join(path, "prompt"), "system template of prompt %q does not render with example_input: %v", p.Name, cleanTemplateErr(err))
	}
	if _, _, err := p.RenderUser(data); err != nil {
		c.ps.add(join(path, "prompt"), "user template of prompt %q does not render with example_input: %v", p.Name, cleanTemplateErr(err))
	}
}

func cleanTemplateErr(err error) string {
	return strings.TrimPrefix(err.Error(), "template: ")
}

// looksLikeDSN accepts the two forms libpq and pgx take: a postgres:// or
// postgresql:// URL with a host or a socket path, or keyword=value pairs.
// The full parse happens when the store opens.
func looksLikeDSN(v string) bool {
	if u, err := url.Parse(v); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		return true
	}
	return !strings.Contains(v, "://") && strings.Contains(v, "=")
}
