// Package wire holds the OpenAI API's wire types: the bodies of chat
// completions, completions and embeddings requests, and of their answers,
// whole and streamed. It is their one home, as github.com/ollama/ollama/api
// is Ollama's: the API's edge (httpapi) decodes callers' requests and
// encodes answers with them, and the adapter (upstream/openai) encodes
// requests to servers and decodes their answers.
//
// One type serves both directions. Fields are declared in the order they
// are encoded; an omitempty field is one that a body sent to a server
// leaves out when it is unset, which a decoder does not mind. Fields that
// only callers send (max_completion_tokens, logit_bias, ...) come last and
// are never set on the way to a server. A value that takes more than one
// shape (stop: a string or an array) or that passes on as it came (a
// tool's parameters, response_format) is a json.RawMessage.
//
// backend/simfleet does not use this package: its simulated servers keep
// their own copy of the shapes on purpose, so that a bug here cannot hide
// on both sides of a test.
package wire

import "encoding/json"

// ChatRequest is the body of POST /chat/completions.
type ChatRequest struct {
	Model            string          `json:"model"`
	Messages         []Message       `json:"messages"`
	Tools            []Tool          `json:"tools,omitempty"`
	Stream           bool            `json:"stream"`
	StreamOptions    *StreamOptions  `json:"stream_options,omitempty"`
	Temperature      *float64        `json:"temperature,omitempty"`
	TopP             *float64        `json:"top_p,omitempty"`
	MaxTokens        *int            `json:"max_tokens,omitempty"`
	Seed             *int            `json:"seed,omitempty"`
	Stop             json.RawMessage `json:"stop,omitempty"` // a string or an array of strings
	ResponseFormat   json.RawMessage `json:"response_format,omitempty"`
	ReasoningEffort  string          `json:"reasoning_effort,omitempty"`
	ToolChoice       json.RawMessage `json:"tool_choice,omitempty"`
	N                *int            `json:"n,omitempty"`
	Logprobs         *bool           `json:"logprobs,omitempty"`
	TopLogprobs      *int            `json:"top_logprobs,omitempty"`
	PresencePenalty  *float64        `json:"presence_penalty,omitempty"`
	FrequencyPenalty *float64        `json:"frequency_penalty,omitempty"`
	// Sampling settings beyond OpenAI's that vLLM and llama.cpp take; the
	// repeat penalty under both servers' names.
	TopK              *int     `json:"top_k,omitempty"`
	MinP              *float64 `json:"min_p,omitempty"`
	RepeatPenalty     *float64 `json:"repeat_penalty,omitempty"`
	RepetitionPenalty *float64 `json:"repetition_penalty,omitempty"`
	// ChatTemplateKwargs reaches the model's chat template (vLLM,
	// llama.cpp): enable_thinking false turns thinking off.
	ChatTemplateKwargs *TemplateKwargs `json:"chat_template_kwargs,omitempty"`

	// Sent by callers only.
	MaxCompletionTokens *int            `json:"max_completion_tokens,omitempty"`
	Reasoning           *Reasoning      `json:"reasoning,omitempty"` // the Responses API's spelling of reasoning_effort
	LogitBias           json.RawMessage `json:"logit_bias,omitempty"`
}

// StreamOptions are a streamed request's options.
type StreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// TemplateKwargs are the chat template's arguments Switchyard reads and
// sets. EnableThinking is nil when a caller did not say; a server is
// always sent a value.
type TemplateKwargs struct {
	EnableThinking *bool `json:"enable_thinking"`
}

// Reasoning is {"effort": ...}.
type Reasoning struct {
	Effort string `json:"effort"`
}

// Message is one turn of a chat request. Content is a string, null, or an
// array of ContentParts.
type Message struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCalls  []ToolCall      `json:"tool_calls,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
	Name       string          `json:"name,omitempty"`
}

// ContentPart is one part of a message's content: text, or an image.
type ContentPart struct {
	Type     string    `json:"type"`
	Text     string    `json:"text,omitempty"`
	ImageURL *ImageURL `json:"image_url,omitempty"`
}

// ImageURL is an image part's URL; Switchyard sends and takes data: URLs.
type ImageURL struct {
	URL string `json:"url"`
}

// Tool is a function the model may call.
type Tool struct {
	Type     string       `json:"type"`
	Function ToolFunction `json:"function"`
}

// ToolFunction is a tool's function; Parameters is its JSON schema as sent.
type ToolFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

// ToolCall is a call of a tool: in a request's assistant turn, in a whole
// answer's message, or a fragment of one in a chunk's delta, where Index
// says which call it continues (nil elsewhere).
type ToolCall struct {
	Index    *int         `json:"index,omitempty"`
	ID       string       `json:"id,omitempty"`
	Type     string       `json:"type"`
	Function FunctionCall `json:"function"`
}

// FunctionCall is a tool call's function; Arguments is a JSON object as a
// string (a fragment of it in a delta).
type FunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// CompletionRequest is the body of POST /completions.
type CompletionRequest struct {
	Model             string          `json:"model"`
	Prompt            json.RawMessage `json:"prompt"` // a string, or an array of strings
	Suffix            string          `json:"suffix,omitempty"`
	Stream            bool            `json:"stream"`
	StreamOptions     *StreamOptions  `json:"stream_options,omitempty"`
	Temperature       *float64        `json:"temperature,omitempty"`
	TopP              *float64        `json:"top_p,omitempty"`
	TopK              *int            `json:"top_k,omitempty"`
	MinP              *float64        `json:"min_p,omitempty"`
	RepeatPenalty     *float64        `json:"repeat_penalty,omitempty"`
	RepetitionPenalty *float64        `json:"repetition_penalty,omitempty"`
	PresencePenalty   *float64        `json:"presence_penalty,omitempty"`
	FrequencyPenalty  *float64        `json:"frequency_penalty,omitempty"`
	MaxTokens         *int            `json:"max_tokens,omitempty"`
	Seed              *int            `json:"seed,omitempty"`
	Stop              json.RawMessage `json:"stop,omitempty"` // a string or an array of strings
	Logprobs          *int            `json:"logprobs,omitempty"`

	// Sent by callers only.
	N         *int            `json:"n,omitempty"`
	Echo      bool            `json:"echo,omitempty"`
	BestOf    *int            `json:"best_of,omitempty"`
	LogitBias json.RawMessage `json:"logit_bias,omitempty"`
}

// EmbeddingRequest is the body of POST /embeddings.
type EmbeddingRequest struct {
	Model          string          `json:"model"`
	Input          json.RawMessage `json:"input"` // a string, or an array of strings
	Dimensions     int             `json:"dimensions,omitempty"`
	EncodingFormat string          `json:"encoding_format,omitempty"`
}

// Completion is a whole answer: a chat.completion, or a text_completion
// (/completions).
type Completion struct {
	ID      string         `json:"id"`
	Object  string         `json:"object"`
	Created int64          `json:"created"`
	Model   string         `json:"model"`
	Choices []Choice       `json:"choices"`
	Usage   UsageWithTotal `json:"usage"`
}

// Choice is one answer of a Completion: a chat's Message, or a
// completion's Text.
type Choice struct {
	Index        int               `json:"index"`
	Message      *AssistantMessage `json:"message,omitempty"`
	Text         *string           `json:"text,omitempty"`
	FinishReason string            `json:"finish_reason"`
	Logprobs     *Logprobs         `json:"logprobs"`
}

// AssistantMessage is what the model said: a whole answer's message, or a
// chunk's delta, a piece of it. Servers name the reasoning either way.
type AssistantMessage struct {
	Role             string     `json:"role"`
	Content          string     `json:"content"`
	Reasoning        string     `json:"reasoning,omitempty"`
	ReasoningContent string     `json:"reasoning_content,omitempty"`
	ToolCalls        []ToolCall `json:"tool_calls,omitempty"`
}

// Logprobs are a chat answer's token log probabilities: {"content":[...]}.
// A completion's older shape has no content.
type Logprobs struct {
	Content json.RawMessage `json:"content"`
}

// Usage is an answer's token counts as Switchyard reads them: a server's
// total_tokens is not read (nor checked), as it is the sum of the two.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
}

// UsageWithTotal is a Usage as an answer to a caller carries it.
type UsageWithTotal struct {
	Usage
	TotalTokens int `json:"total_tokens"`
}

// Chunk is one data event of a streamed answer: a chat.completion.chunk
// or a text_completion chunk, or one of the errors servers send in their
// place: {"error":{...}} and {"error":"..."} (Error), and the flat
// {"object":"error","message":...,"code":...}. A reader decodes every
// event of a stream into one Chunk, so the values it need not read as
// strings are kept raw: a string would cost an allocation a chunk.
type Chunk struct {
	Model   json.RawMessage `json:"model"`
	Choices []ChunkChoice   `json:"choices"`
	Usage   *Usage          `json:"usage"`
	Error   json.RawMessage `json:"error"`
	Object  json.RawMessage `json:"object"`
	Message string          `json:"message"`
	Code    json.RawMessage `json:"code"`
}

// ChunkChoice is one answer's piece in a Chunk: a chat's Delta, or a
// completion's Text.
type ChunkChoice struct {
	Text         string           `json:"text"`
	Delta        AssistantMessage `json:"delta"`
	FinishReason string           `json:"finish_reason"`
	Logprobs     *Logprobs        `json:"logprobs"`
}
