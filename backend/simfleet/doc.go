// Package simfleet runs simulated upstream model servers: real HTTP servers
// on 127.0.0.1 that speak Ollama's native API or the OpenAI chat API as vLLM
// serves it, byte for byte, with realistic pacing and faults that can be
// switched while they run. Demo mode, the tests of other packages, the
// benchmarks and the failover experiment all use it as their fleet.
//
// A Server answers every chat request with a deterministic text that names
// the server (Answer, Thinking), so a test can tell which server produced a
// stream and spot mixed output. Its Fault decides how it misbehaves for new
// requests; its Stats say what happened to the requests it received, and
// WaitIdle/WaitStats let a test wait for them without sleeping.
//
// An Ollama server serves POST /api/chat (NDJSON, or one JSON object with
// stream:false), GET /api/tags, GET /api/ps, POST /api/show, GET
// /api/version and GET or HEAD /. An OpenAI server serves POST
// /v1/chat/completions (SSE ending in data: [DONE], or one chat.completion),
// GET /v1/models, GET /metrics (vLLM's pressure gauges) and GET /health.
//
// A Fleet is a set of servers known as router candidates: StartDemo is the
// demo fleet, StartFast a fleet without delays for tests and benchmarks.
package simfleet
