package proxy

import (
	"bufio"
	"net/http"

	"github.com/contractd/contractd/audit"
	"github.com/contractd/contractd/config"
	"github.com/contractd/contractd/contracts"
)

type chunkDelta struct {
	Role    string  `json:"role,omitempty"`
	Content *string `json:"content,omitempty"`
}

type chunkChoice struct {
	Index        int        `json:"index"`
	Delta        chunkDelta `json:"delta"`
	Logprobs     *struct{}  `json:"logprobs"`
	FinishReason *string    `json:"finish_reason"`
}

type chunk struct {
	ID                string        `json:"id"`
	Object            string        `json:"object"`
	Created           int64         `json:"created"`
	Model             string        `json:"model"`
	SystemFingerprint string        `json:"system_fingerprint,omitempty"`
	Choices           []chunkChoice `json:"choices"`
	Usage             *audit.Usage  `json:"usage,omitempty"`
	Contract          *contractInfo `json:"contract,omitempty"`
}

// writeStream sends an accepted verdict as standard chat.completion.chunk
// events: role, content, finish_reason stop (with the contract member), a
// usage chunk when asked, then [DONE]. Nothing is streamed before the
// verdict, so no invalid byte can reach the client.
func writeStream(w http.ResponseWriter, v *verdict, route *config.Route, k *contracts.Contract, includeUsage bool) {
	body := successBody(v, route, k)
	bw := startSSE(w)
	base := chunk{ID: body.ID, Object: "chat.completion.chunk", Created: body.Created, Model: body.Model, SystemFingerprint: body.SystemFingerprint}
	empty, content, stop := "", string(v.result.JSON), "stop"
	send := func(c chunk) {
		bw.WriteString("data: ")
		bw.Write(mustJSON(c))
		bw.WriteString("\n\n")
	}
	c := base
	c.Choices = []chunkChoice{{Delta: chunkDelta{Role: "assistant", Content: &empty}}}
	send(c)
	c = base
	c.Choices = []chunkChoice{{Delta: chunkDelta{Content: &content}}}
	send(c)
	c = base
	ci := body.Contract
	c.Choices = []chunkChoice{{FinishReason: &stop}}
	c.Contract = &ci
	send(c)
	if includeUsage {
		c = base
		c.Choices = []chunkChoice{}
		u := body.Usage
		c.Usage = &u
		send(c)
	}
	bw.WriteString("data: [DONE]\n\n")
	bw.Flush()
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

// startSSE sends a 200 event-stream's headers; events go through the
// returned writer, flushed once the verdict's events are all written.
func startSSE(w http.ResponseWriter) *bufio.Writer {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	return bufio.NewWriter(w)
}
