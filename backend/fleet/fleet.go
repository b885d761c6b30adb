// Package fleet holds Switchyard's domain: the candidates a request may be
// routed to, the request and the chunks of its answer, the record of each
// attempt, live events, and the Stream interface every upstream adapter
// implements. It imports the standard library only; every other package of
// the backend depends on it and it depends on none of them.
package fleet

import (
	"context"
	"encoding/json"
	"io"
	"net/url"
	"strings"
	"time"
)

// Provider names the wire protocol a candidate speaks.
type Provider string

const (
	// ProviderOllama is Ollama's native API (/api/chat, NDJSON).
	ProviderOllama Provider = "ollama"
	// ProviderOpenAI is the OpenAI chat completions API (SSE), as served by
	// vLLM, llama.cpp server, LM Studio and Ollama's /v1.
	ProviderOpenAI Provider = "openai"
)

// Candidate is one configured (endpoint, model) pair. It is a value: the
// router keeps its own copy and a config reload replaces it whole.
type Candidate struct {
	ID               string
	Provider         Provider
	URL              string // base URL as the server's own clients take it
	Model            string // the model name the upstream knows
	Priority         int    // lower is tried earlier
	Enabled          bool
	SupportsThinking bool
	// ThinkLevels: the model takes a reasoning level ("low", "medium",
	// "high") rather than on/off (gpt-oss); other models are sent true.
	ThinkLevels bool
	GPUs        []int  // local GPU indexes it runs on; nil means "all local GPUs" for a local endpoint
	APIKey      string // resolved upstream key, never logged
	// Slots is how many requests the server runs at once, as configured;
	// 0 means as the server itself reports (llama.cpp's /slots), else
	// unknown.
	Slots int
	// Local reports whether URL points at this machine (loopback).
	Local bool
	// ServerKey names the candidate's server across a team's nodes, whose
	// URLs for it may differ; "" means the URL names it, unless Local (a
	// loopback URL is never shared without a key).
	ServerKey string
	// Embeds: the model makes embeddings (the config says so, or its
	// server lists the "embedding" capability). An embedding request for
	// "auto" goes to such a candidate.
	Embeds bool
	// EmbedOnly: the model makes nothing but embeddings (its server lists
	// no "completion" capability); chats and generations skip it.
	EmbedOnly bool
}

// Message is one chat turn.
type Message struct {
	Role       string
	Content    string
	Thinking   string
	ToolCalls  []ToolCall
	ToolCallID string
	Name       string
	Images     []string // base64, Ollama style
}

// ToolCall is a complete tool call of a message, or one delta of it in a
// Chunk (Index says which call a delta belongs to; Arguments arrive as
// fragments).
type ToolCall struct {
	Index     int
	ID        string
	Type      string
	Name      string
	Arguments string
}

// Tool is a function the model may call, in the shape both OpenAI and Ollama
// accept.
type Tool struct {
	Type     string
	Function ToolFunction
}

// ToolFunction describes a callable function.
type ToolFunction struct {
	Name        string
	Description string
	Parameters  json.RawMessage
}

// Options are the sampling settings a caller may set, in the words both
// dialects share or map to (docs/API.md, "Fields across dialects"). Nil
// means "the upstream's default".
type Options struct {
	Temperature      *float64
	TopP             *float64
	TopK             *int
	MinP             *float64
	RepeatPenalty    *float64 // Ollama repeat_penalty, vLLM repetition_penalty
	PresencePenalty  *float64
	FrequencyPenalty *float64
	MaxTokens        *int
	Seed             *int
	Stop             []string
	// NumCtx is the context window the caller asked for (Ollama num_ctx);
	// OpenAI-compatible servers fix it at start.
	NumCtx *int
	// N is how many answers the caller wants; nil means one.
	N *int
	// Logprobs asks for the log probabilities of the answer's tokens, with
	// TopLogprobs alternatives each.
	Logprobs    bool
	TopLogprobs *int
}

// Protocol names the API a caller used to reach Switchyard.
type Protocol string

const (
	ProtocolOpenAI Protocol = "openai"
	ProtocolOllama Protocol = "ollama"
	ProtocolUI     Protocol = "ui"
)

// Every provider and protocol, for the API's description.
var (
	Providers = []Provider{ProviderOllama, ProviderOpenAI}
	Protocols = []Protocol{ProtocolOpenAI, ProtocolOllama, ProtocolUI}
)

// Kind is what a request asks of the model.
type Kind string

const (
	// KindChat: messages in, an answer out (/api/chat, /v1/chat/completions,
	// /v1/responses).
	KindChat Kind = "chat"
	// KindGenerate: a prompt in, its continuation out (/api/generate,
	// /v1/completions).
	KindGenerate Kind = "generate"
	// KindEmbed: texts in, one vector each out (/api/embed, /api/embeddings,
	// /v1/embeddings).
	KindEmbed Kind = "embed"
)

// Request is one request as the router sees it, whatever protocol it
// arrived in. The router and the adapters read it and never modify it.
type Request struct {
	ID       string   // Switchyard's request id
	Protocol Protocol // how the caller reached us
	Kind     Kind     // "" is KindChat
	Model    string   // the model the caller named ("", "auto", an id or an alias)
	Messages []Message
	Tools    []Tool
	// ToolChoice is OpenAI's tool_choice as the caller sent it ("auto",
	// "none", "required" or a named function), nil for none.
	ToolChoice json.RawMessage
	Options    Options
	// KeepAlive is Ollama's keep_alive as the caller sent it (a duration
	// string or a number of seconds), nil for none.
	KeepAlive json.RawMessage

	// Generate: the prompt, the text after the gap to fill (editor
	// completion), a system prompt, and whether the prompt is sent as is,
	// without the model's template (Ollama raw; /v1/completions always).
	Prompt    string
	Suffix    string
	System    string
	RawPrompt bool
	Images    []string // base64, with the prompt

	// Embed: the texts to embed, and the vector size asked for (0: the
	// model's own).
	Input      []string
	Dimensions int

	// DialectOnly names fields the caller set that only an upstream of its
	// own dialect can honour (OpenAI's logit_bias, Ollama's context): the
	// router skips candidates of the other dialect rather than drop them.
	DialectOnly []string

	// Raw is the caller's body as it came, when its dialect may be sent on
	// unchanged: an upstream that speaks that dialect gets every field,
	// also those Switchyard does not know (docs/API.md, "Fidelity").
	Raw *Raw
	// Thinking is true when the caller asked for reasoning.
	Thinking bool
	// NoThinking is true when the caller turned reasoning off explicitly
	// (Ollama think:false, OpenAI reasoning_effort "none"): models that
	// think by default must be told.
	NoThinking bool
	// ThinkLevel is the requested effort ("low", "medium", "high") or ""
	// for plain on/off.
	ThinkLevel string
	// Format is Ollama's format field or OpenAI's response_format, passed
	// through as the caller sent it.
	Format json.RawMessage
	Stream bool // the caller wants a stream (the router always streams upstream)
}

// Raw is a caller's request body as sent, field by field.
type Raw struct {
	Dialect Provider // the wire format of the fields
	// Endpoint is the path the caller sent them to ("/api/embeddings"),
	// for an upstream that has the same endpoint.
	Endpoint string
	Fields   map[string]json.RawMessage
}

// KindOf is req's kind, KindChat when unset.
func (req *Request) KindOf() Kind {
	if req.Kind == "" {
		return KindChat
	}
	return req.Kind
}

// RawFor returns the caller's fields when they may go to an upstream that
// speaks dialect p unchanged, else nil.
func (req *Request) RawFor(p Provider) map[string]json.RawMessage {
	if req.Raw == nil || req.Raw.Dialect != p {
		return nil
	}
	if req.Raw.Fields == nil {
		return map[string]json.RawMessage{}
	}
	return req.Raw.Fields
}

// Chunk is one event of an answer, normalised across wire formats.
type Chunk struct {
	Role      string
	Content   string
	Reasoning string
	ToolCalls []ToolCall
	// FinishReason is set on the chunk that ends the answer ("stop",
	// "length", "tool_calls", ...). A stream without it was truncated.
	FinishReason string
	Usage        *Usage
	Model        string // the model name the upstream reported, if any
	// Logprobs are the log probabilities of this chunk's tokens, as a JSON
	// array of {token, logprob, bytes, top_logprobs} (the shape OpenAI's
	// logprobs.content and Ollama's logprobs share), nil when not asked.
	Logprobs json.RawMessage
	// Embeddings are the vectors of an embed request, one per input.
	Embeddings [][]float32
	// UsageOnly: the event reports usage and nothing else (the last event
	// of an OpenAI stream with include_usage).
	UsageOnly bool
	// Whole: the chunk is a whole answer, asked for unstreamed (a server
	// that refused the streamed form): when it arrived says nothing of
	// the server's time to a first token.
	Whole bool
	// Raw is the upstream's event as it came (an SSE data payload, an
	// NDJSON line, a JSON body), for a caller of the same dialect: it keeps
	// every field the upstream sent. It is only valid until the next Recv.
	Raw []byte
}

// IsFirstToken reports whether c carries content, reasoning text or a
// tool-call delta: the event that commits a stream. Role-only chunks, empty
// deltas and usage-only chunks are not a first token.
func (c *Chunk) IsFirstToken() bool {
	return c.Content != "" || c.Reasoning != "" || len(c.ToolCalls) > 0 || len(c.Embeddings) > 0
}

// Usage is what an upstream reports about a finished answer.
type Usage struct {
	PromptTokens     int
	CompletionTokens int
	// LoadDuration is the time the upstream spent loading the model for
	// this request (Ollama's load_duration), zero when unknown.
	LoadDuration time.Duration
}

// TTFTSample is what a committed attempt tells the first-token deadline
// learner.
type TTFTSample struct {
	TTFT time.Duration // from the attempt's start to its first token
	// Cold: the attempt's deadline allowed for loading the model.
	Cold bool
	// Queued: the server was full when the attempt started, so TTFT
	// includes a wait in its queue and is no sample of its speed.
	Queued bool
	Usage  *Usage // what the upstream reported at the end, nil when unknown
}

// MinLoad is the shortest load_duration taken for a real load of a model.
// Ollama reports a few milliseconds of "load" on every warm answer.
const MinLoad = 50 * time.Millisecond

// RealLoad reports whether s's answer included loading the model: the
// upstream reported at least MinLoad of loading, and either the attempt
// was known to be cold or the load took most of its wait for the first
// token.
func (s TTFTSample) RealLoad() bool {
	if s.Usage == nil || s.Usage.LoadDuration < MinLoad {
		return false
	}
	return s.Cold || s.Usage.LoadDuration > s.TTFT/2
}

// Warm reports whether s measures the server's speed: a first token, with
// no load and no wait in a queue before it (docs/DESIGN.md, "What is a
// sample").
func (s TTFTSample) Warm() bool {
	return s.TTFT > 0 && !s.Cold && !s.Queued && !s.RealLoad()
}

// Stream is one upstream answer, read chunk by chunk like an io.Reader.
//
// Recv blocks until the next chunk, and returns io.EOF after the last chunk
// of a complete answer (one whose end marker the wire format defines was
// seen: [DONE], finish_reason or done:true). An answer that ends without that
// marker returns ErrTruncated; an error the upstream reported in the stream
// returns an *EventError; cancelling the context the stream was opened with
// makes Recv return promptly with the context's error.
//
// Close releases the connection at once, whether or not the answer is
// complete; it is safe to call more than once, and from another goroutine
// than Recv. The opener of a Stream closes it.
type Stream interface {
	Recv() (Chunk, error)
	Close() error
}

// Backend opens answers on one candidate: a chat, a generation or an
// embedding, as req.Kind says. Implementations are safe for concurrent use.
type Backend interface {
	// Open sends req to the upstream and returns its answer once the
	// response headers arrived. An HTTP error status is a *StatusError. The
	// stream lives under ctx. An embedding answer is one chunk with the
	// vectors.
	Open(ctx context.Context, c Candidate, req *Request) (Stream, error)
}

// Passthrougher is a Stream that can stop making text of the events once
// its reader forwards the upstream's bytes as they are (a caller of the
// upstream's own dialect, after commit): from Passthrough on, a chunk
// carries Raw, and FinishReason, Usage and UsageOnly when its event has
// them, but no Content, Reasoning, ToolCalls or Model. The answer's end
// and its errors are read as before.
type Passthrougher interface {
	Passthrough()
}

// Waiter is a Stream that can say when Recv is about to wait for the
// upstream: from BeforeWait on, Recv calls f first, on its own goroutine,
// each time it has no whole event left and reads the upstream's body. A
// reader that writes chunks out can write them then, not one by one:
// what the upstream sent together goes out together, and nothing is held
// back while the upstream is silent.
type Waiter interface {
	BeforeWait(f func())
}

// IntoReceiver is a Stream that can put its next chunk into one its
// reader keeps: RecvInto(c) is Recv with the chunk written to *c (the
// zero Chunk with an error). A chunk returned by value is copied through
// every frame of the read, and those frames are under the reader's
// writes to its caller (BeforeWait): they made the handler's stack, which
// an open stream holds, outgrow 8 KiB.
type IntoReceiver interface {
	RecvInto(c *Chunk) error
}

// WaitReader is a body that calls Before, when set, before each Read: an
// adapter reads its body through one to be a Waiter.
type WaitReader struct {
	R      io.Reader
	Before func()
}

func (w *WaitReader) Read(p []byte) (int, error) {
	if w.Before != nil {
		w.Before()
	}
	return w.R.Read(p)
}

// Checker is a Backend that can tell, before sending, that req would lose
// something on its way to c that changes the answer (a field c's dialect
// has no place for). The router then skips c for req, as it skips a model
// that lacks a capability.
type Checker interface {
	Check(c Candidate, req *Request) error
}

// MergeToolCall folds one tool-call delta into the calls so far: deltas
// with the same Index extend one call, whose name and arguments may arrive
// in fragments (OpenAI streams); a delta with a new Index starts a call.
func MergeToolCall(calls []ToolCall, d ToolCall) []ToolCall {
	for i := range calls {
		if calls[i].Index == d.Index {
			if d.ID != "" {
				calls[i].ID = d.ID
			}
			if d.Type != "" {
				calls[i].Type = d.Type
			}
			calls[i].Name += d.Name
			calls[i].Arguments += d.Arguments
			return calls
		}
	}
	return append(calls, d)
}

// SameServer reports whether a and b are served by one server: the same
// server_key when both have one, else the same host and port in their
// URLs, where every name of this machine ("localhost", "127.0.0.1",
// "[::1]") is one host. Two candidates of one server fail alike when the
// server is sick, so the same failure on both says nothing about the
// request.
func SameServer(a, b Candidate) bool {
	if a.ServerKey != "" && b.ServerKey != "" {
		return a.ServerKey == b.ServerKey
	}
	ua, erra := url.Parse(a.URL)
	ub, errb := url.Parse(b.URL)
	if erra != nil || errb != nil || ua.Host == "" || ub.Host == "" || portOf(ua) != portOf(ub) {
		return false
	}
	ha, hb := ua.Hostname(), ub.Hostname()
	return strings.EqualFold(ha, hb) || ThisMachine(ha) && ThisMachine(hb)
}

// portOf is a URL's port, its scheme's when it names none.
func portOf(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if u.Scheme == "https" {
		return "443"
	}
	return "80"
}
