package config

import (
	"time"

	"gopkg.in/yaml.v3"
)

// File is the YAML document as written. Pointers distinguish
// "absent" from zero where the default differs from zero.
type File struct {
	Server    Server        `yaml:"server"`
	Audit     Audit         `yaml:"audit"`
	Upstreams []UpstreamDef `yaml:"upstreams"`
	Labels    []LabelDef    `yaml:"labels"`
	Prompts   []PromptDef   `yaml:"prompts"`
	Contracts []ContractDef `yaml:"contracts"`
	Routes    []RouteDef    `yaml:"routes"`
	Review    Review        `yaml:"review"`
}

// Review is the review queue's store and events.
type Review struct {
	Store     string        `yaml:"store"`
	Path      string        `yaml:"path"`
	DSNEnv    string        `yaml:"dsn_env"`
	Retention time.Duration `yaml:"retention"`
	Webhook   *WebhookDef   `yaml:"webhook"`
	// DedupeWindow is a pointer so that an explicit 0 (off) differs from
	// absent (the default).
	DedupeWindow *time.Duration `yaml:"dedupe_window"`
}

// WebhookDef is where review events are POSTed.
type WebhookDef struct {
	URL       string `yaml:"url"`
	SecretEnv string `yaml:"secret_env"`
}

type Server struct {
	Listen         string        `yaml:"listen"`
	AdminListen    *string       `yaml:"admin_listen"`
	MaxBodyBytes   int64         `yaml:"max_body_bytes"`
	RequestTimeout time.Duration `yaml:"request_timeout"`
	APIKeysEnv     string        `yaml:"api_keys_env"`
	AdminKeysEnv   string        `yaml:"admin_keys_env"`
	// limits; absent (or 0) is the default.
	MaxConnections   int           `yaml:"max_connections"`
	MaxInflightBytes int64         `yaml:"max_inflight_bytes"`
	BodyReadTimeout  time.Duration `yaml:"body_read_timeout"`
	MemoryLimit      string        `yaml:"memory_limit"`
	// Extensions (documented in docs/config.md).
	RateLimit       *RateLimit    `yaml:"rate_limit"`
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout"`
	LogLevel        string        `yaml:"log_level"`
}

// RateLimit is a per-client-key token bucket, kept in this process
// (store: memory) or in Redis, shared by every replica (store: redis).
type RateLimit struct {
	RequestsPerSecond float64        `yaml:"requests_per_second"`
	Burst             int            `yaml:"burst"`
	Store             RateLimitStore `yaml:"store"`
	RedisURLEnv       string         `yaml:"redis_url_env"`
	// Timeout bounds one Redis call (store: redis); 0 is the default.
	Timeout time.Duration `yaml:"timeout"`
}

type Audit struct {
	Sink           string `yaml:"sink"`
	Path           string `yaml:"path"`
	IncludeContent bool   `yaml:"include_content"`
}

type UpstreamDef struct {
	Name           string        `yaml:"name"`
	BaseURL        string        `yaml:"base_url"`
	APIKeyEnv      string        `yaml:"api_key_env"`
	Timeout        time.Duration `yaml:"timeout"`
	MaxRetries     *int          `yaml:"max_retries"`
	MaxTokensParam string        `yaml:"max_tokens_param"`
	MaxConcurrency int           `yaml:"max_concurrency"` // extension: cap on concurrent calls, 0 = none
}

type LabelDef struct {
	Name   string   `yaml:"name"`
	Values []string `yaml:"values"`
}

type PromptDef struct {
	Name         string    `yaml:"name"`
	InputSchema  yaml.Node `yaml:"input_schema"`
	ExampleInput yaml.Node `yaml:"example_input"`
	System       string    `yaml:"system"`
	User         string    `yaml:"user"`
}

type ContractDef struct {
	Name           string    `yaml:"name"`
	SchemaFile     string    `yaml:"schema_file"`
	Schema         yaml.Node `yaml:"schema"`
	Extraction     string    `yaml:"extraction"`
	MaxOutputBytes int       `yaml:"max_output_bytes"`
	Policies       Policies  `yaml:"policies"`
}

type Policies struct {
	Labels     []LabelPolicy     `yaml:"labels"`
	Evidence   []EvidencePolicy  `yaml:"evidence"`
	Questions  []QuestionPolicy  `yaml:"questions"`
	Forbidden  []ForbiddenPolicy `yaml:"forbidden"`
	PromptLeak bool              `yaml:"prompt_leak"`
}

type LabelPolicy struct {
	Path string `yaml:"path"`
	Set  string `yaml:"set"`
}

type EvidencePolicy struct {
	Path   string `yaml:"path"`
	Source string `yaml:"source"`
}

type QuestionPolicy struct {
	Path    string `yaml:"path"`
	Exactly *int   `yaml:"exactly"`
	Max     *int   `yaml:"max"`
}

type ForbiddenPolicy struct {
	Name    string `yaml:"name"`
	Path    string `yaml:"path"`
	Pattern string `yaml:"pattern"`
}

type RouteDef struct {
	Name            string     `yaml:"name"`
	Upstream        string     `yaml:"upstream"`
	Model           string     `yaml:"model"`
	Prompt          string     `yaml:"prompt"`
	Contract        string     `yaml:"contract"`
	Temperature     *float64   `yaml:"temperature"`
	MaxOutputTokens int        `yaml:"max_output_tokens"`
	Seed            *int64     `yaml:"seed"`
	ResponseFormat  string     `yaml:"response_format"`
	ClientSystem    string     `yaml:"client_system"`
	Budget          BudgetDef  `yaml:"budget"`
	Retry           []RetryDef `yaml:"retry"`
	Passthrough     bool       `yaml:"passthrough"`
}

type BudgetDef struct {
	MaxInputTokens int `yaml:"max_input_tokens"`
	MaxTotalTokens int `yaml:"max_total_tokens"`
}

type RetryDef struct {
	Temperature *float64    `yaml:"temperature"`
	Shorten     *ShortenDef `yaml:"shorten"`
}

type ShortenDef struct {
	Ratio float64 `yaml:"ratio"`
	Keep  string  `yaml:"keep"`
}

// name is the entry's name, which compile's named checks first (set,
// valid, not an earlier entry's) for each list of named entries.
func (d UpstreamDef) name() string { return d.Name }
func (d LabelDef) name() string    { return d.Name }
func (d PromptDef) name() string   { return d.Name }
func (d ContractDef) name() string { return d.Name }
func (d RouteDef) name() string    { return d.Name }
