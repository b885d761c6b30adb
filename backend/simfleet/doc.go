// Package simfleet runs simulated upstream model servers: real HTTP servers
// on 127.0.0.1 that speak Ollama's native API or the OpenAI API as vLLM
// serves it, byte for byte, with realistic pacing and faults that can be
// switched while they run. Demo mode, the tests of other packages, the
// benchmarks and the failover experiment all use it as their fleet.
//
// A Server answers every chat request with a deterministic text that names
// the server (Answer, Thinking), so a test can tell which server produced a
// stream and spot mixed output. A chat that offers tools is answered with a
// call of the first tool, its arguments an instance of the tool's schema;
// once the last message is the tool's result, the answer quotes it
// (ToolAnswer). A request for structured output gets a JSON value
// (Structured), a generate request with a suffix the infill text (Infill),
// and an embeddings request unit vectors hashed from its texts
// (Embedding). Its Fault decides how it misbehaves for new requests; its
// Stats say what happened to the requests it received, and
// WaitIdle/WaitStats let a test wait for them without sleeping.
//
// An Ollama server serves POST /api/chat and /api/generate (NDJSON, or one
// JSON object with stream:false; without messages or prompt they load or
// unload the model), POST /api/embed and /api/embeddings, GET /api/tags,
// GET /api/ps, POST /api/show, GET /api/version and GET or HEAD /, and
// Ollama's OpenAI-compatible API under /v1. An OpenAI server serves, as
// vLLM does, POST /v1/chat/completions and /v1/completions (SSE ending in
// data: [DONE], or one object), POST /v1/embeddings, GET /v1/models, GET
// /metrics (vLLM's pressure gauges) and GET /health. The shapes are the
// real servers': as measured (backend/realserver/FINDINGS.md) or as their
// sources write them; where servers differ (tool-call ids, how a call is
// streamed, error bodies), the comment on the dialect says whose it
// follows.
//
// A Fleet is a set of servers known as router candidates: StartDemo is the
// demo fleet, StartFast a fleet without delays for tests and benchmarks.
package simfleet
