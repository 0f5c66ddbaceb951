// Package proxy is contractd's HTTP side: the OpenAI-compatible API,
// the per-request pipeline over one compiled config.Runtime (read input,
// render the prompt, call the upstream, judge, retry, answer), upstream
// calls with transport retries, SSE, and the single gate that turns typed
// errors into OpenAI error envelopes.
//
// Like httputil.ReverseProxy it changes only what it owns: on contract
// routes the route's fields replace the client's and every other byte of
// the request is forwarded as sent; passthrough routes change only model
// and Authorization.
package proxy
