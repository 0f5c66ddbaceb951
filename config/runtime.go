package config

import (
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/contractd/contractd/audit"
	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/retry"
)

// Runtime is a compiled config. It is immutable: reloads build a new one
// and swap it, and requests keep the one they started with.
type Runtime struct {
	Path      string // config file as given
	SHA256    string // of what was loaded: the config file and every schema_file (loadedSHA)
	Server    ServerSettings
	Audit     AuditSettings
	Review    ReviewSettings
	Upstreams map[string]*Upstream
	Labels    map[string][]string
	Prompts   map[string]*contracts.Prompt
	Contracts map[string]*contracts.Contract
	Routes    map[string]*Route
	RouteList []*Route  // in file order, for /v1/models
	Warnings  []Problem // doubtful but accepted
	// Files are the absolute paths the Runtime was built from: the config
	// file and every schema_file. A change to any of them reloads.
	Files []string
}

// ServerSettings are server settings with defaults applied.
type ServerSettings struct {
	Listen          string
	AdminListen     string // "" serves admin endpoints on Listen
	MaxBodyBytes    int64
	RequestTimeout  time.Duration
	APIKeysEnv      string
	AdminKeysEnv    string     // "" or unset: the admin endpoints follow the client-key rule
	RateLimit       *RateLimit // nil: no rate limit; Store is memory or redis
	ShutdownTimeout time.Duration
	LogLevel        slog.Level // server.log_level (info when unset); CONTRACTD_LOG_LEVEL overrides it in serve
	// Limits.
	MaxConnections   int           // open connections on Listen
	MaxInflightBytes int64         // request bodies and upstream replies held at once
	BodyReadTimeout  time.Duration // to read a request body; never past RequestTimeout
	MemoryLimit      MemoryLimit
}

// MemoryLimit is server.memory_limit: Go's soft memory limit.
type MemoryLimit struct {
	Auto  bool  // 80 % of the cgroup limit, none when unlimited
	Bytes int64 // a fixed size; 0 with Auto false: off
}

// AuditSettings are audit settings with defaults applied; Path is absolute.
type AuditSettings struct {
	Sink           audit.SinkKind
	Path           string
	IncludeContent bool
}

// RateLimitStore is server.rate_limit.store: where the buckets are kept.
type RateLimitStore string

// The rate limit stores.
const (
	RateLimitMemory RateLimitStore = "memory" // the default: this process
	RateLimitRedis  RateLimitStore = "redis"  // shared by replicas
)

// ReviewStore is review.store: where needs_review items are kept.
type ReviewStore string

// The review stores.
const (
	ReviewSQLite   ReviewStore = "sqlite" // the default: a file beside the config
	ReviewPostgres ReviewStore = "postgres"
	ReviewNone     ReviewStore = "none" // nothing kept
)

// ReviewSettings are review settings with defaults applied; Path is absolute.
type ReviewSettings struct {
	Store     ReviewStore
	Path      string // sqlite file
	DSNEnv    string // postgres: variable holding the DSN
	Retention time.Duration
	Webhook   *WebhookSettings // nil: no webhook
	// DedupeWindow is how long an identical repeat of a request that
	// ended in needs_review gets the same 422 without an upstream call;
	// 0 is off.
	DedupeWindow time.Duration
	// SpoolPath is where items the store could not take are appended:
	// beside the sqlite file, or beside the config file for postgres.
	SpoolPath string
}

// WebhookSettings: the secret itself is read from SecretEnv when serving.
type WebhookSettings struct {
	URL       string
	SecretEnv string
}

// Upstream is an OpenAI-compatible endpoint. The key itself is read from
// APIKeyEnv when serving, never stored in the config.
type Upstream struct {
	Name           string
	BaseURL        string // without trailing slash
	APIKeyEnv      string
	Timeout        time.Duration
	MaxRetries     int
	MaxTokensParam TokensParam
	MaxConcurrency int

	// chatURL is BaseURL + "/chat/completions", parsed once by Compile
	// and never modified: ChatURL hands out copies.
	chatURL *url.URL
}

// ChatURL returns a fresh copy of the upstream's chat completions URL
// (BaseURL + "/chat/completions"), parsed once when the config was
// compiled, so a call need not parse it: the caller owns the copy (net/http
// may modify a request's URL). An Upstream built without Compile has its
// URL parsed on each call.
func (u *Upstream) ChatURL() (*url.URL, error) {
	if u.chatURL == nil {
		return parseRequestURL(u.BaseURL + "/chat/completions")
	}
	c := *u.chatURL
	return &c, nil
}

// parseRequestURL parses a URL as http.NewRequest does: an empty port
// (a trailing ":") is dropped from the host.
func parseRequestURL(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		return nil, err
	}
	if strings.LastIndex(u.Host, ":") > strings.LastIndex(u.Host, "]") {
		u.Host = strings.TrimSuffix(u.Host, ":")
	}
	return u, nil
}

// TokensParam is the request field an upstream reads the output token
// limit from: newer OpenAI models refuse max_tokens.
type TokensParam string

const (
	MaxTokens           TokensParam = "max_tokens" // the default
	MaxCompletionTokens TokensParam = "max_completion_tokens"
)

// Route is what a client names as "model".
type Route struct {
	Name        string
	Upstream    *Upstream
	Model       string
	Passthrough bool

	// Contract routes only.
	Prompt          *contracts.BoundPrompt
	Contract        *contracts.Contract
	Temperature     float64
	MaxOutputTokens int
	Seed            *int64
	ResponseFormat  ResponseFormat
	// ResponseFormatJSON is the upstream body's response_format value
	// for ResponseFormat (nil for none), built once here rather than on
	// every attempt: with json_schema it carries the whole schema.
	ResponseFormatJSON []byte
	ClientSystem       ClientSystem
	Budget             retry.Budget
	Plan               []retry.Attempt
	// SystemTokens is the static system prompt's token count by the
	// model's counter, made on a budget's first count: the prompt (often
	// the contract's whole schema) is counted once, not per request.
	SystemTokens retry.CountOnce
}

// ResponseFormat is a contract route's response_format: what it asks the
// upstream for.
type ResponseFormat string

const (
	ResponseFormatNone       ResponseFormat = "none"
	ResponseFormatJSONObject ResponseFormat = "json_object"
	ResponseFormatJSONSchema ResponseFormat = "json_schema" // the contract's schema, strict
)

// ClientSystem is what a contract route does with a client's own system
// message.
type ClientSystem string

const (
	ClientSystemReject ClientSystem = "reject" // 400
	ClientSystemDrop   ClientSystem = "drop"   // removed; the route's prompt stays
)

// Defaults (documented in docs/config.md).
const (
	DefaultListen           = "127.0.0.1:8080"
	DefaultMaxBodyBytes     = 1 << 20
	DefaultRequestTimeout   = 120 * time.Second
	DefaultShutdownTimeout  = 30 * time.Second
	DefaultMaxConnections   = 4096
	DefaultMaxInflightBytes = 256 << 20
	DefaultBodyReadTimeout  = 30 * time.Second
	DefaultUpstreamTimeout  = 60 * time.Second
	DefaultMaxRetries       = 2
	DefaultMaxOutputBytes   = 65536
	DefaultMaxOutputTokens  = 1024
	DefaultReviewPath       = "reviews.db"
	DefaultReviewRetention  = 720 * time.Hour
	DefaultDedupeWindow     = 60 * time.Second
	DefaultReviewDSNEnv     = "CONTRACTD_REVIEW_DSN"
	DefaultRedisURLEnv      = "CONTRACTD_REDIS_URL"
	DefaultRateLimitTimeout = 100 * time.Millisecond
	ReviewSpoolFile         = "review-spool.jsonl"
)
