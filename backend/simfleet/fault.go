package simfleet

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/switchyard/switchyard/backend/fleet"
)

// FaultKind names one way a simulated server misbehaves. The names are the
// ones the HTTP API, the CLI and the experiment use.
type FaultKind string

// ErrUnknownFault: a fault name that is none of the kinds.
var ErrUnknownFault = errors.New("unknown fault")

// The fault kinds. faultTable says what each does; each applies to chat
// requests that arrive after it was set (requests already in flight keep
// the behaviour they started with), except FaultRefuse, which takes the
// whole server off the network.
const (
	FaultHealthy          FaultKind = "healthy"
	FaultRefuse           FaultKind = "refuse"
	FaultStatus           FaultKind = "status"
	FaultBusy             FaultKind = "busy"
	FaultHangHeaders      FaultKind = "hang_headers"
	FaultHangFirstToken   FaultKind = "hang_first_token"
	FaultRoleThenStall    FaultKind = "role_then_stall"
	FaultCloseBeforeFirst FaultKind = "close_before_first"
	FaultEmpty            FaultKind = "empty"
	FaultErrorEvent       FaultKind = "error_event"
	FaultDieAfter         FaultKind = "die_after"
	FaultTruncated        FaultKind = "truncated"
	FaultMalformed        FaultKind = "malformed"
	FaultSlow             FaultKind = "slow"
)

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

// faultRow is one fault kind: its name, its parameter, the words a UI shows
// for it, and its part in the phases of an answer (see Server.answer). Its
// phases replace those of the healthy script; the ones it leaves nil are
// played as a healthy server plays them.
type faultRow struct {
	kind  FaultKind
	param faultParam // nil: the fault takes none
	label string     // a few words for a menu
	about string     // one line for the UI
	phases
}

// faultTable is every fault kind, healthy first, in the order a UI lists
// them. A new fault is one row.
var faultTable = []faultRow{
	{kind: FaultHealthy, label: "Healthy", about: "Answers normally."},
	// SetFault and the server's connection handling play it: no request
	// gets as far as an answer.
	{kind: FaultRefuse, label: "Refuse connections",
		about: "Closes its port and its idle connections, like a crashed server; any other fault opens the port again."},
	{kind: FaultStatus, label: "Answer an HTTP error",
		about: "Answers the HTTP error status N with the protocol's error body.",
		param: number("HTTP N", func(f *Fault) *int { return &f.Status }, DefaultFaultStatus, httpErrorStatus),
		phases: phases{respond: func(a *reply) (bool, error) {
			status := a.fault.Status
			a.d.writeError(a.w, status, fmt.Sprintf("simulated HTTP %d (server %s)", status, a.s.cfg.Name))
			return true, nil
		}}},
	{kind: FaultBusy, label: "Busy",
		about: `Sheds load: Ollama answers 503 "server busy", OpenAI-style servers 429 with a Retry-After of the given duration.`,
		param: duration("retry after DUR", func(f *Fault) *time.Duration { return &f.RetryAfter }, DefaultRetryAfter),
		phases: phases{respond: func(a *reply) (bool, error) {
			a.d.writeBusy(a.w, a.fault.RetryAfter)
			return true, nil
		}}},
	{kind: FaultHangHeaders, label: "Hang before headers",
		about:  "Never sends the response headers; waits until the client goes away.",
		phases: phases{respond: func(a *reply) (bool, error) { return true, a.hang() }}},
	{kind: FaultHangFirstToken, label: "Stall before first token",
		about:  "Sends the response headers, then nothing.",
		phases: phases{open: func(a *reply) (bool, error) { return true, a.stall(false) }}},
	{kind: FaultRoleThenStall, label: "Role chunk, then stall",
		about:  "Sends the headers and a chunk without content (OpenAI's role chunk, an empty Ollama line), then nothing.",
		phases: phases{open: func(a *reply) (bool, error) { return true, a.stall(a.x.req.stream) }}},
	{kind: FaultCloseBeforeFirst, label: "Crash before first token",
		about:  "Sends the response headers, then cuts the connection.",
		phases: phases{open: func(a *reply) (bool, error) { return true, a.crash() }}},
	{kind: FaultEmpty, label: "Empty stream",
		about: "Sends a complete, well-formed stream without any content: its end marker only.",
		phases: phases{first: func(a *reply) (bool, error) {
			a.x.tokens = nil
			return false, nil
		}}},
	{kind: FaultErrorEvent, label: "Error event before first token",
		about: "Sends an error inside the stream where the first token should be (HTTP 500 without streaming).",
		phases: phases{
			// vLLM reports an error that strikes before generation
			// without the role chunk.
			open: func(a *reply) (bool, error) { return false, a.open(false) },
			first: func(a *reply) (bool, error) {
				msg := "simulated error before the first token (server " + a.s.cfg.Name + ")"
				if !a.x.req.stream {
					a.d.writeError(a.w, http.StatusInternalServerError, msg)
					return true, nil
				}
				return true, a.send(a.d.errorEvent(a.x, msg))
			},
		}},
	{kind: FaultDieAfter, label: "Die mid-stream",
		about: "Sends N tokens (thinking included), then cuts the connection.",
		param: number("after N tokens", func(f *Fault) *int { return &f.AfterTokens }, 0, nil),
		phases: phases{
			token: func(a *reply, t token) (bool, error) {
				if len(a.x.sent) == a.fault.AfterTokens {
					return true, a.die()
				}
				return healthy.token(a, t)
			},
			end: (*reply).die,
		}},
	{kind: FaultTruncated, label: "Truncated stream",
		about: "Sends every token, then ends cleanly but without the end marker (half the body without streaming).",
		phases: phases{end: func(a *reply) error {
			if !a.x.req.stream {
				b := a.d.whole(a.x)
				return a.send(b[:len(b)/2])
			}
			return nil
		}}},
	{kind: FaultMalformed, label: "Malformed output",
		about: "Sends a chunk that is not JSON where the first token should be, then ends.",
		phases: phases{first: func(a *reply) (bool, error) {
			if !a.x.req.stream {
				return true, a.send([]byte("}{ this is not JSON\n"))
			}
			return true, a.send(a.d.garbage(a.x))
		}}},
	{kind: FaultSlow, label: "Slow tokens",
		about: "Answers normally, with the given pause between two tokens.",
		param: duration("DUR apart", func(f *Fault) *time.Duration { return &f.Gap }, DefaultSlowGap),
		phases: phases{token: func(a *reply, t token) (bool, error) {
			return false, a.token(t, a.fault.Gap)
		}}},
}

// row returns the row of kind k.
func row(k FaultKind) (faultRow, bool) {
	for _, r := range faultTable {
		if r.kind == k {
			return r, true
		}
	}
	return faultRow{}, false
}

// FaultKinds returns every fault kind, healthy first, in the order a UI
// lists them.
func FaultKinds() []FaultKind {
	kinds := make([]FaultKind, len(faultTable))
	for i, r := range faultTable {
		kinds[i] = r.kind
	}
	return kinds
}

// FaultInfo describes a fault for a UI.
type FaultInfo struct {
	// Name is the fault's name without its parameter, as ParseFault reads it.
	Name string
	// Label is a few words for a menu: "Crash before first token".
	Label string
	// Description says in one line what the server does.
	Description string
	// Arg describes the parameter the fault takes after a colon, with N
	// standing for a number and DUR for a duration ("after N tokens" for
	// "die_after:3"), or is "" when it takes none.
	Arg string
}

// faultInfos describes the fault kinds in the order of FaultKinds.
func faultInfos() []FaultInfo {
	out := make([]FaultInfo, len(faultTable))
	for i, r := range faultTable {
		out[i] = FaultInfo{Name: string(r.kind), Label: r.label, Description: r.about}
		if r.param != nil {
			out[i].Arg = r.param.about()
		}
	}
	return out
}

// Fault is the misbehaviour of one server. The zero value is healthy. Only
// the parameter that Kind takes (its row in faultTable says which) is used;
// zero means its default (AfterTokens zero means cut right where the first
// token would be).
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
	r, ok := row(kind)
	if !ok {
		names := make([]string, len(faultTable))
		for i, r := range faultTable {
			names[i] = string(r.kind)
		}
		return Fault{}, fmt.Errorf("%w %q: one of %s", ErrUnknownFault, fleet.ClipTo(name, 100), strings.Join(names, ", "))
	}
	f := Fault{Kind: kind}
	if !hasArg {
		return f.normalized(), nil
	}
	if r.param == nil {
		return Fault{}, fmt.Errorf("fault %s takes no parameter", kind)
	}
	if err := r.param.parse(&f, arg); err != nil {
		return Fault{}, fmt.Errorf("fault %s takes %s (%s), not %q", kind, r.param.form(), r.param.about(), fleet.ClipTo(arg, 100))
	}
	if err := f.validate(); err != nil {
		return Fault{}, err
	}
	return f.normalized(), nil
}

// String returns the name ParseFault reads: "healthy", "status:503",
// "die_after:3", "busy" or "busy:2s", "slow" or "slow:250ms", ... A number
// parameter is always written, a duration only when it is not its default.
func (f Fault) String() string {
	f = f.normalized()
	if r, ok := row(f.Kind); ok && r.param != nil {
		if arg, ok := r.param.format(f); ok {
			return string(f.Kind) + ":" + arg
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

// validate checks f's kind and the parameter it takes.
func (f Fault) validate() error {
	if f.Kind == "" {
		return nil
	}
	r, ok := row(f.Kind)
	if !ok {
		return fmt.Errorf("unknown fault %q", f.Kind)
	}
	if r.param != nil {
		if err := r.param.validate(f); err != nil {
			return fmt.Errorf("fault %s: %w", f.Kind, err)
		}
	}
	return nil
}

// normalized fills the default of f's parameter and clears the parameters
// its kind does not take, so equal behaviour compares equal.
func (f Fault) normalized() Fault {
	n := Fault{Kind: f.Kind}
	if n.Kind == "" {
		n.Kind = FaultHealthy
	}
	if r, ok := row(n.Kind); ok && r.param != nil {
		r.param.copy(f, &n)
	}
	return n
}

// faultParam is the parameter a fault kind takes after a colon in its name.
type faultParam interface {
	// about describes it for a UI (FaultInfo.Arg).
	about() string
	// form says what text it takes: "a whole number".
	form() string
	// parse reads s into f.
	parse(f *Fault, s string) error
	// format writes f's value, and says whether the name shows it.
	format(f Fault) (string, bool)
	// copy sets the parameter of to from that of from, or to its default
	// when that is zero.
	copy(from Fault, to *Fault)
	// validate checks f's value.
	validate(f Fault) error
}

// param is a faultParam of type T.
type param[T int | time.Duration] struct {
	what   string          // FaultInfo.Arg
	field  func(*Fault) *T // where it lives in a Fault
	def    T               // what zero means
	always bool            // String writes it even when it is def
	read   func(string) (T, error)
	check  func(T) error // for a non-zero value, beyond being non-negative; nil: none
}

// number is a count that String always writes.
func number(what string, field func(*Fault) *int, def int, check func(int) error) faultParam {
	return param[int]{what: what, field: field, def: def, always: true, read: strconv.Atoi, check: check}
}

// duration is a Go duration or a whole number of seconds (as in
// Retry-After), which String writes only when it is not def.
func duration(what string, field func(*Fault) *time.Duration, def time.Duration) faultParam {
	return param[time.Duration]{what: what, field: field, def: def, read: parseSeconds}
}

func (p param[T]) about() string { return p.what }

func (p param[T]) form() string {
	if _, ok := any(p.def).(time.Duration); ok {
		return "a duration such as 250ms or 2s"
	}
	return "a whole number"
}

func (p param[T]) parse(f *Fault, s string) error {
	v, err := p.read(s)
	if err != nil {
		return err
	}
	*p.field(f) = v
	return nil
}

func (p param[T]) format(f Fault) (string, bool) {
	v := *p.field(&f)
	return fmt.Sprint(v), p.always || v != p.def
}

func (p param[T]) copy(from Fault, to *Fault) {
	v := *p.field(&from)
	if v == 0 {
		v = p.def
	}
	*p.field(to) = v
}

func (p param[T]) validate(f Fault) error {
	v := *p.field(&f)
	switch {
	case v < 0:
		return fmt.Errorf("negative parameter %v", v)
	case v != 0 && p.check != nil:
		return p.check(v)
	}
	return nil
}

// httpErrorStatus accepts the HTTP error statuses.
func httpErrorStatus(status int) error {
	if status < 400 || status > 599 {
		return fmt.Errorf("%d is not an HTTP error status (400-599)", status)
	}
	return nil
}

// parseSeconds reads a Go duration, or a whole number of seconds as in
// Retry-After.
func parseSeconds(s string) (time.Duration, error) {
	if n, err := strconv.Atoi(s); err == nil {
		return time.Duration(n) * time.Second, nil
	}
	return time.ParseDuration(s)
}
