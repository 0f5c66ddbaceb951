package telemetry

import (
	"context"
	"errors"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/contractd/contractd/proxy"
)

// Span names.
const (
	SpanAttempt  = "contractd.attempt"
	SpanValidate = "contractd.validate"
)

// Span attribute keys. The gen_ai.* keys are the OpenTelemetry GenAI
// semantic conventions; contractd.* are contractd's own. None carries
// content or secrets.
const (
	attrGenAIOperation     = attribute.Key("gen_ai.operation.name")
	attrGenAIRequestModel  = attribute.Key("gen_ai.request.model")
	attrGenAITemperature   = attribute.Key("gen_ai.request.temperature")
	attrGenAIInputTokens   = attribute.Key("gen_ai.usage.input_tokens")
	attrGenAIOutputTokens  = attribute.Key("gen_ai.usage.output_tokens")
	attrGenAIFinishReasons = attribute.Key("gen_ai.response.finish_reasons")
	attrGenAIResponseModel = attribute.Key("gen_ai.response.model")
	attrErrorType          = attribute.Key("error.type")
	attrRoute              = attribute.Key("contractd.route")
	attrAttempt            = attribute.Key("contractd.attempt")
	attrViolations         = attribute.Key("contractd.violations")
	attrViolationRules     = attribute.Key("contractd.violation_rules")
	attrValid              = attribute.Key("contractd.valid")
	attrRequestID          = attribute.Key("contractd.request_id")
	attrOutcome            = attribute.Key("contractd.outcome")
	attrAttempts           = attribute.Key("contractd.attempts")
	attrErrorCode          = attribute.Key("contractd.error_code")

	genAIOperationChat      = "chat"
	errorTypeTimeout        = "timeout"
	errorTypeConnection     = "connection_error"
	errorTypeUpstreamOther  = "_OTHER"
	statusUpstreamTimeout   = "upstream timeout"
	statusUpstreamConnError = "upstream connection failed"
)

var genAIChat = attrGenAIOperation.String(genAIOperationChat)

// attemptKey holds, in an attempt's context, the *routeSeries of its route
// (StartValidation labels the validation histogram with it).
type attemptKey struct{}

// StartAttempt opens the "contractd.attempt" span (kind client: it wraps
// the upstream call, and the traceparent sent upstream names it as parent).
// Every attribute is set once, when the attempt ends: one allocation for
// the span's attribute list instead of two.
func (t *Telemetry) StartAttempt(ctx context.Context, a proxy.AttemptInfo) (context.Context, func(proxy.AttemptResult)) {
	ctx = context.WithValue(ctx, attemptKey{}, t.routes.get(a.Route))
	if t.sdkTP == nil {
		// Nothing is recorded: a no-op span would only carry the context's
		// (remote) span context again, which the upstream call already
		// propagates from ctx.
		return ctx, endNothing
	}
	ctx, span := t.tracer.Start(ctx, SpanAttempt, trace.WithSpanKind(trace.SpanKindClient))
	if !span.IsRecording() {
		return ctx, func(proxy.AttemptResult) { span.End() }
	}
	return ctx, func(r proxy.AttemptResult) {
		attrs := make([]attribute.KeyValue, 0, 13)
		attrs = append(attrs,
			genAIChat,
			attrGenAIRequestModel.String(a.Model),
			attrGenAITemperature.Float64(a.Temperature),
			attrRoute.String(a.Route),
			attrAttempt.Int(a.Attempt),
		)
		if r.Err != nil {
			typ, desc := upstreamErrorType(r.Err)
			span.SetAttributes(append(attrs, attrErrorType.String(typ))...)
			span.SetStatus(codes.Error, desc)
			span.End()
			return
		}
		attrs = append(attrs,
			attrGenAIInputTokens.Int(r.Usage.PromptTokens),
			attrGenAIOutputTokens.Int(r.Usage.CompletionTokens),
			attrGenAIFinishReasons.StringSlice([]string{r.Finish}),
			attrViolations.Int(len(r.Violations)),
			attrValid.Bool(len(r.Violations) == 0),
		)
		if r.UpstreamModel != "" {
			attrs = append(attrs, attrGenAIResponseModel.String(r.UpstreamModel))
		}
		if len(r.Violations) > 0 {
			rules := make([]string, len(r.Violations))
			for i, v := range r.Violations {
				rules[i] = v.Kind + "/" + v.Rule
			}
			attrs = append(attrs, attrViolationRules.StringSlice(rules))
		}
		span.SetAttributes(attrs...)
		span.End()
	}
}

// upstreamErrorType maps an upstream failure to error.type and a span
// status description built from the status alone: the upstream's own error
// message can echo request details (even a masked key), so it stays out.
func upstreamErrorType(err error) (typ, desc string) {
	var ue *proxy.UpstreamError
	if !errors.As(err, &ue) {
		return errorTypeUpstreamOther, "upstream call failed"
	}
	switch {
	case ue.Timeout:
		return errorTypeTimeout, statusUpstreamTimeout
	case ue.Status != 0:
		s := strconv.Itoa(ue.Status)
		return s, "upstream status " + s
	}
	return errorTypeConnection, statusUpstreamConnError
}

// StartValidation opens the "contractd.validate" span under the attempt
// and times the validation for contractd_validation_duration_seconds.
func (t *Telemetry) StartValidation(ctx context.Context) (context.Context, func(violations int)) {
	start := time.Now()
	r, ok := ctx.Value(attemptKey{}).(*routeSeries)
	if !ok {
		r = t.routes.get("")
	}
	if t.sdkTP == nil {
		return ctx, func(int) { r.validation.observe(t.valDur, time.Since(start).Seconds()) }
	}
	ctx, span := t.tracer.Start(ctx, SpanValidate)
	return ctx, func(n int) {
		r.validation.observe(t.valDur, time.Since(start).Seconds())
		if span.IsRecording() {
			span.SetAttributes(attrViolations.Int(n))
		}
		span.End()
	}
}

func endNothing(proxy.AttemptResult) {}
