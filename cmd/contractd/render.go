package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/contractd/contractd/config"
	"github.com/contractd/contractd/proxy"
)

func cmdRender(args []string, stdout, stderr io.Writer) int {
	fs, cfg := newFlags("render", stderr)
	routeName := fs.String("route", "", "route to render")
	inputPath := fs.String("input", "", "a chat completion or Responses API request body, or the input object (default: the prompt's example_input)")
	api := fs.String("api", "", "the request body's API: chat or responses (default: responses when the body has \"input\" and no \"messages\")")
	attempt := fs.Int("attempt", 1, "attempt number (1-based)")
	route := toolRoute("render", fs, cfg, routeName, args, stderr)
	if route == nil {
		return exitUsage
	}
	var raw []byte
	if *inputPath != "" {
		b, err := os.ReadFile(*inputPath)
		if err != nil {
			fmt.Fprintf(stderr, "contractd render: cannot read input: %s\n", cleanErr(err))
			return exitUsage
		}
		raw = b
	}
	body, err := requestBodyFor(route, raw)
	if err != nil {
		fmt.Fprintf(stderr, "contractd render: %v\n", err)
		return exitUsage
	}
	render := proxy.Render
	switch *api {
	case "responses":
		render = proxy.RenderResponses
	case "chat":
	case "":
		if isResponsesBody(body) {
			render = proxy.RenderResponses
		}
	default:
		fmt.Fprintf(stderr, "contractd render: --api must be chat or responses\n")
		return exitUsage
	}
	out, err := render(route, body, *attempt)
	if errors.Is(err, proxy.ErrNoSuchAttempt) {
		fmt.Fprintf(stderr, "contractd render: --attempt %d: %v\n", *attempt, err)
		return exitUsage
	}
	if err != nil {
		fmt.Fprintf(stderr, "contractd render: %v\n", err)
		return exitProblem
	}
	var pretty bytes.Buffer
	if json.Indent(&pretty, out, "", "  ") != nil {
		pretty.Reset()
		pretty.Write(out)
	}
	pretty.WriteByte('\n')
	_, _ = stdout.Write(pretty.Bytes())
	return exitOK
}

// requestBodyFor turns --input into a client request body: a file that is
// already a request (has "messages" or "contract_input") is used as is; any
// other JSON object is the input object; anything else is user text.
func requestBodyFor(route *config.Route, raw []byte) ([]byte, error) {
	if raw == nil {
		if route.Passthrough {
			return nil, fmt.Errorf("route %q is a passthrough route: it has no prompt or example_input; give --input (a request body) to see what it forwards", route.Name)
		}
		if route.Prompt.ExampleInput == nil {
			return nil, fmt.Errorf("route %q has no example_input; give --input", route.Name)
		}
		if s, ok := route.Prompt.ExampleInput.(string); ok {
			return json.Marshal(map[string]any{"model": route.Name, "messages": []any{map[string]string{"role": "user", "content": s}}})
		}
		return json.Marshal(map[string]any{"model": route.Name, "contract_input": route.Prompt.ExampleInput})
	}
	var probe map[string]json.RawMessage
	if json.Unmarshal(raw, &probe) == nil {
		if _, ok := probe["messages"]; ok {
			return raw, nil
		}
		if _, ok := probe["contract_input"]; ok {
			return raw, nil
		}
		if isResponsesBody(raw) {
			return raw, nil
		}
		if !route.Passthrough && route.Prompt.InputSchema != nil {
			return json.Marshal(map[string]any{"model": route.Name, "contract_input": json.RawMessage(raw)})
		}
	}
	return json.Marshal(map[string]any{"model": route.Name, "messages": []any{map[string]string{"role": "user", "content": string(raw)}}})
}

// isResponsesBody tells a Responses API request body from a chat one.
func isResponsesBody(b []byte) bool {
	var probe map[string]json.RawMessage
	if json.Unmarshal(b, &probe) != nil {
		return false
	}
	_, input := probe["input"]
	_, messages := probe["messages"]
	return input && !messages
}
