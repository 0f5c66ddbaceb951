// Package replay judges stored outputs again under a (new) config, so a
// contract change is checked like code before it is deployed.
//
// Sources are audit files written with include_content: true (plain,
// rotated or gzip-compressed, streamed line by line in bounded memory), the
// JSON Lines of GET /admin/reviews/export, and the configured review store
// through review.Reader (opened read-only by the command). Offline, each stored output is judged by
// proxy.Judge, the function serving uses, with the subject rebuilt from the
// stored input by the serving request path (proxy.RequestSubject), so
// evidence is looked up in the stored input and prompt_leak compares with
// the prompt as the new config renders it. Live, each stored request goes
// through the route's current attempt plan against the upstream
// (proxy.Server.Replay).
package replay
