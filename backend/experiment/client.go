package experiment

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Client asks an OpenAI-compatible chat endpoint (Switchyard's, or a
// simulated upstream's) for completions, streamed (Chat) or whole
// (Complete), and measures each answer as its caller sees it. It reads the
// server-sent events itself, so what it measures is the server, not a
// client library. It is safe for concurrent use.
type Client struct {
	// HTTP sends the requests. Nil means http.DefaultClient.
	HTTP *http.Client
	// BaseURL is the API base up to and including /v1, like
	// "http://127.0.0.1:8484/v1".
	BaseURL string
}

// Answer is what one chat request looked like from the caller's side.
type Answer struct {
	// Status is the HTTP status, 0 when no response arrived.
	Status int
	// Content is the answer text received, complete or not.
	Content string
	// RequestID, Served and Fallback are Switchyard's X-Switchyard-*
	// headers; empty and false from a server that does not send them.
	RequestID string
	Served    string
	Fallback  bool
	// TTFT is the time from sending the request to the first event that
	// carries content or reasoning; zero when none came, and always zero
	// for a whole answer (Complete), which has no first token of its own.
	TTFT time.Duration
	// Latency is the time from sending the request to the end of the
	// response (or the error).
	Latency time.Duration
	// Sent is when the request was sent, the time TTFT and Latency count
	// from.
	Sent time.Time
	// Err is why the answer is not complete: a transport error, an HTTP
	// error status, an error event inside the stream, or a stream that
	// ended without data: [DONE]. Nil for a complete answer.
	Err error
	// StreamError says Err arrived inside an HTTP 200 stream (an error
	// event or a cut) rather than instead of it.
	StreamError bool
}

// ErrCut is the Err of a stream that ended without data: [DONE].
var ErrCut = errors.New("stream ended without data: [DONE]")

// ChatBody returns the body of a chat request for model with one short
// user message, asking for a stream (for Chat) or for one JSON answer (for
// Complete). Callers that send many requests build it once.
func ChatBody(model string, stream bool) []byte {
	b, _ := json.Marshal(map[string]any{
		"model":    model,
		"stream":   stream,
		"messages": []map[string]string{{"role": "user", "content": "hello"}},
	})
	return b
}

// Chat sends body (see ChatBody, streamed) to {BaseURL}/chat/completions
// and reads the answer to its end. It never returns early on an error:
// the error is in the Answer.
func (c *Client) Chat(ctx context.Context, body []byte) (a Answer) {
	resp, start := c.post(ctx, body, "text/event-stream", &a)
	defer func() {
		if a.Latency == 0 {
			a.Latency = time.Since(start)
		}
	}()
	if resp == nil {
		return a
	}
	defer resp.Body.Close()
	var content strings.Builder
	err := readEvents(resp.Body, func(data []byte) error {
		var ev event
		if err := json.Unmarshal(data, &ev); err != nil {
			return fmt.Errorf("malformed event %.80q: %w", data, err)
		}
		if ev.Error != nil {
			return fmt.Errorf("error event: %s", ev.Error.Message)
		}
		for _, ch := range ev.Choices {
			if a.TTFT == 0 && (ch.Delta.Content != "" || ch.Delta.Reasoning != "" || ch.Delta.ReasoningContent != "") {
				a.TTFT = time.Since(start)
			}
			content.WriteString(ch.Delta.Content)
		}
		return nil
	})
	a.Content = content.String()
	if err != nil {
		a.Err, a.StreamError = err, true
		return a
	}
	// The answer is complete; read the end of the body (the chunked
	// encoding's last chunk) before closing it, untimed, so that the
	// connection is reused rather than closed under a server that has not
	// finished its response.
	a.Latency = time.Since(start)
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	return a
}

// Complete sends body (see ChatBody, not streamed) to
// {BaseURL}/chat/completions and reads the one JSON answer to the end of
// the body, as a caller's JSON decoder needs it. The Answer has no TTFT.
// Like Chat, it reports errors in the Answer.
func (c *Client) Complete(ctx context.Context, body []byte) (a Answer) {
	resp, start := c.post(ctx, body, "application/json", &a)
	defer func() {
		if a.Latency == 0 {
			a.Latency = time.Since(start)
		}
	}()
	if resp == nil {
		return a
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	a.Latency = time.Since(start)
	if err != nil {
		a.Err = err
		return a
	}
	var ans struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	switch err := json.Unmarshal(data, &ans); {
	case err != nil:
		a.Err = fmt.Errorf("malformed answer %.80q: %w", data, err)
	case len(ans.Choices) == 0:
		a.Err = fmt.Errorf("answer without choices: %.80q", data)
	default:
		a.Content = ans.Choices[0].Message.Content
	}
	return a
}

// post sends body to {BaseURL}/chat/completions and fills in what the
// status line and headers of the answer say. It returns the response, to
// be read and closed by the caller, or nil with a.Err set when there is no
// answer to read (a transport error or an HTTP error status); and the time
// the request was sent.
func (c *Client) post(ctx context.Context, body []byte, accept string, a *Answer) (*http.Response, time.Time) {
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	start := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.BaseURL+"/chat/completions", bytes.NewReader(body))
	if err != nil {
		a.Err = err
		return nil, start
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", accept)
	start = time.Now()
	a.Sent = start
	resp, err := hc.Do(req)
	if err != nil {
		a.Err = err
		return nil, start
	}
	a.Status = resp.StatusCode
	a.RequestID = resp.Header.Get("X-Switchyard-Request-Id")
	a.Served = resp.Header.Get("X-Switchyard-Served-Model")
	a.Fallback = resp.Header.Get("X-Switchyard-Fallback") == "true"
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		resp.Body.Close()
		a.Err = fmt.Errorf("HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(msg))
		return nil, start
	}
	return resp, start
}

// event is the part of a chat.completion.chunk (or an error event) the
// client reads.
type event struct {
	Choices []struct {
		Delta struct {
			Content          string `json:"content"`
			Reasoning        string `json:"reasoning"`
			ReasoningContent string `json:"reasoning_content"`
		} `json:"delta"`
	} `json:"choices"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
}

// readEvents reads server-sent events from r and calls fn with the data of
// each, until data: [DONE]. Data lines of one event are joined with
// newlines; comments and other fields are skipped. It returns ErrCut when r
// ends before [DONE], and fn's first error.
func readEvents(r io.Reader, fn func(data []byte) error) error {
	br := bufio.NewReaderSize(r, 4096)
	var data []byte
	have := false
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A line longer than the buffer: gather it whole.
			long := append([]byte(nil), line...)
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = br.ReadSlice('\n')
				long = append(long, line...)
			}
			line = long
		}
		if err != nil && len(line) == 0 {
			switch {
			case have && string(data) == "[DONE]":
				return nil // the last blank line is missing: still complete
			case err == io.EOF:
				return ErrCut
			}
			return err
		}
		line = bytes.TrimRight(line, "\r\n")
		switch {
		case len(line) == 0:
			if !have {
				continue
			}
			if string(data) == "[DONE]" {
				return nil
			}
			if err := fn(data); err != nil {
				return err
			}
			data, have = data[:0], false
		case bytes.HasPrefix(line, []byte("data:")):
			v := bytes.TrimPrefix(line[len("data:"):], []byte(" "))
			if have {
				data = append(data, '\n')
			}
			data, have = append(data, v...), true
		}
	}
}
