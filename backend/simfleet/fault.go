package simfleet

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// FaultKind names one way a simulated server misbehaves. The names are the
// ones the HTTP API, the CLI and the experiment use.
type FaultKind string

// The fault kinds. Each applies to chat requests that arrive after it was
// set (requests already in flight keep the behaviour they started with),
// except FaultRefuse, which takes the whole server off the network.
const (
	// FaultHealthy answers normally.
	FaultHealthy FaultKind = "healthy"
	// FaultRefuse closes the listening socket (connections are refused) and
	// the idle keep-alive connections; the port is listened on again when
	// any other fault is set.
	FaultRefuse FaultKind = "refuse"
	// FaultStatus answers HTTP Fault.Status with the protocol's error body.
	FaultStatus FaultKind = "status"
	// FaultBusy is load shedding: Ollama answers 503 "server busy",
	// OpenAI-style servers 429 with Retry-After.
	FaultBusy FaultKind = "busy"
	// FaultHangHeaders never sends response headers; the handler waits
	// until the client goes away.
	FaultHangHeaders FaultKind = "hang_headers"
	// FaultHangFirstToken sends the headers, then nothing.
	FaultHangFirstToken FaultKind = "hang_first_token"
	// FaultRoleThenStall sends the headers and a chunk without content
	// (OpenAI: the role-only chunk; Ollama: an empty-content line), then
	// nothing.
	FaultRoleThenStall FaultKind = "role_then_stall"
	// FaultCloseBeforeFirst sends the headers, then cuts the connection.
	FaultCloseBeforeFirst FaultKind = "close_before_first"
	// FaultEmpty sends a complete, well-formed stream without any content:
	// the finish chunk (OpenAI) or the done line (Ollama) only.
	FaultEmpty FaultKind = "empty"
	// FaultErrorEvent sends an error inside the stream before the first
	// token: OpenAI/vLLM data: {"error":{...}} followed by data: [DONE];
	// Ollama an {"error":"..."} line.
	FaultErrorEvent FaultKind = "error_event"
	// FaultDieAfter sends Fault.AfterTokens tokens (thinking tokens
	// included), then cuts the connection.
	FaultDieAfter FaultKind = "die_after"
	// FaultTruncated sends every token, then ends the response cleanly but
	// without the end marker: no finish_reason and no [DONE] (OpenAI), no
	// done:true line (Ollama).
	FaultTruncated FaultKind = "truncated"
	// FaultMalformed sends a chunk that is not valid JSON where the first
	// token should be, then ends the response.
	FaultMalformed FaultKind = "malformed"
	// FaultSlow answers normally with Fault.Gap between tokens.
	FaultSlow FaultKind = "slow"
)

// FaultKinds returns every fault kind, healthy first, in the order a UI
// lists them.
func FaultKinds() []FaultKind {
	return []FaultKind{
		FaultHealthy, FaultRefuse, FaultStatus, FaultBusy, FaultHangHeaders,
		FaultHangFirstToken, FaultRoleThenStall, FaultCloseBeforeFirst,
		FaultEmpty, FaultErrorEvent, FaultDieAfter, FaultTruncated,
		FaultMalformed, FaultSlow,
	}
}

func (k FaultKind) valid() bool {
	for _, known := range FaultKinds() {
		if k == known {
			return true
		}
	}
	return false
}

// Defaults applied by SetFault to parameters left zero.
const (
	// DefaultFaultStatus is the status of FaultStatus when Status is zero.
	DefaultFaultStatus = 500
	// DefaultRetryAfter is the Retry-After of FaultBusy when RetryAfter is
	// zero.
	DefaultRetryAfter = time.Second
	// DefaultSlowGap is the token gap of FaultSlow when Gap is zero.
	DefaultSlowGap = time.Second
)

// Fault is the misbehaviour of one server. The zero value is healthy. Only
// the parameter that Kind names is used: Status for FaultStatus,
// AfterTokens for FaultDieAfter, RetryAfter for FaultBusy, Gap for
// FaultSlow; zero parameters mean the defaults above (AfterTokens zero means
// cut right where the first token would be).
//
// Fault implements encoding.TextMarshaler and encoding.TextUnmarshaler with
// the names of String and ParseFault, so it can travel in JSON and YAML.
type Fault struct {
	Kind        FaultKind
	Status      int
	AfterTokens int
	RetryAfter  time.Duration
	Gap         time.Duration
}

// ParseFault reads a fault from its name: a kind alone ("healthy",
// "hang_first_token", ...) or a kind with its parameter after a colon:
// "status:503", "die_after:3", "busy:2s" (or "busy:2", seconds), "slow:250ms".
// The empty string is healthy.
func ParseFault(s string) (Fault, error) {
	name, arg, hasArg := strings.Cut(strings.TrimSpace(s), ":")
	kind := FaultKind(name)
	if name == "" {
		kind = FaultHealthy
	}
	if !kind.valid() {
		return Fault{}, fmt.Errorf("unknown fault %q", name)
	}
	f := Fault{Kind: kind}
	if !hasArg {
		return f.normalized(), nil
	}
	var err error
	switch kind {
	case FaultStatus:
		f.Status, err = strconv.Atoi(arg)
	case FaultDieAfter:
		f.AfterTokens, err = strconv.Atoi(arg)
	case FaultBusy:
		f.RetryAfter, err = parseSeconds(arg)
	case FaultSlow:
		f.Gap, err = parseSeconds(arg)
	default:
		return Fault{}, fmt.Errorf("fault %s takes no parameter", kind)
	}
	if err != nil {
		return Fault{}, fmt.Errorf("fault %s: bad parameter %q: %w", kind, arg, err)
	}
	if err := f.validate(); err != nil {
		return Fault{}, err
	}
	return f.normalized(), nil
}

// parseSeconds reads a Go duration, or a whole number of seconds as in
// Retry-After.
func parseSeconds(s string) (time.Duration, error) {
	if n, err := strconv.Atoi(s); err == nil {
		return time.Duration(n) * time.Second, nil
	}
	return time.ParseDuration(s)
}

// String returns the name ParseFault reads: "healthy", "status:503",
// "die_after:3", "busy" or "busy:2s", "slow" or "slow:250ms", ... A
// parameter equal to its default is left out, except for status and
// die_after.
func (f Fault) String() string {
	f = f.normalized()
	switch f.Kind {
	case FaultStatus:
		return fmt.Sprintf("%s:%d", f.Kind, f.Status)
	case FaultDieAfter:
		return fmt.Sprintf("%s:%d", f.Kind, f.AfterTokens)
	case FaultBusy:
		if f.RetryAfter != DefaultRetryAfter {
			return fmt.Sprintf("%s:%s", f.Kind, f.RetryAfter)
		}
	case FaultSlow:
		if f.Gap != DefaultSlowGap {
			return fmt.Sprintf("%s:%s", f.Kind, f.Gap)
		}
	}
	return string(f.Kind)
}

// MarshalText returns String.
func (f Fault) MarshalText() ([]byte, error) { return []byte(f.String()), nil }

// UnmarshalText parses text with ParseFault.
func (f *Fault) UnmarshalText(text []byte) error {
	parsed, err := ParseFault(string(text))
	if err != nil {
		return err
	}
	*f = parsed
	return nil
}

func (f Fault) validate() error {
	if f.Kind != "" && !f.Kind.valid() {
		return fmt.Errorf("unknown fault %q", f.Kind)
	}
	switch {
	case f.Kind == FaultStatus && f.Status != 0 && (f.Status < 400 || f.Status > 599):
		return fmt.Errorf("fault status: %d is not an HTTP error status (400-599)", f.Status)
	case f.AfterTokens < 0:
		return fmt.Errorf("fault %s: negative token count %d", f.Kind, f.AfterTokens)
	case f.RetryAfter < 0 || f.Gap < 0:
		return fmt.Errorf("fault %s: negative duration", f.Kind)
	}
	return nil
}

// normalized fills the defaults of f's kind and clears the parameters its
// kind does not use, so equal behaviour compares equal.
func (f Fault) normalized() Fault {
	n := Fault{Kind: f.Kind}
	switch f.Kind {
	case "":
		n.Kind = FaultHealthy
	case FaultStatus:
		n.Status = f.Status
		if n.Status == 0 {
			n.Status = DefaultFaultStatus
		}
	case FaultDieAfter:
		n.AfterTokens = f.AfterTokens
	case FaultBusy:
		n.RetryAfter = f.RetryAfter
		if n.RetryAfter == 0 {
			n.RetryAfter = DefaultRetryAfter
		}
	case FaultSlow:
		n.Gap = f.Gap
		if n.Gap == 0 {
			n.Gap = DefaultSlowGap
		}
	}
	return n
}
