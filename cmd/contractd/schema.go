package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
)

// cmdSchema prints the JSON Schema a route enforces: the document GET
// /v1/models/{route} returns as contract.schema, indented (keys in file
// order), for building a client's typed schema from it.
func cmdSchema(args []string, stdout, stderr io.Writer) int {
	fs, cfg := newFlags("schema", stderr)
	routeName := fs.String("route", "", "route whose contract schema to print")
	route := toolRoute("schema", fs, cfg, routeName, args, stderr)
	switch {
	case route == nil:
		return exitUsage
	case route.Passthrough || route.Contract == nil:
		fmt.Fprintf(stderr, "contractd schema: route %q is a passthrough route: it has no contract\n", *routeName)
		return exitUsage
	}
	var out bytes.Buffer
	if err := json.Indent(&out, route.Contract.Schema.JSON(), "", "  "); err != nil {
		fmt.Fprintf(stderr, "contractd schema: %v\n", err)
		return exitProblem
	}
	out.WriteByte('\n')
	_, _ = stdout.Write(out.Bytes())
	return exitOK
}
