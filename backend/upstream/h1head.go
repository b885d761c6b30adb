package upstream

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/textproto"
	"strconv"
	"strings"
)

// maxHead bounds an answer's status line and headers together; a chunk's
// size line and its trailer lines are bounded by the read buffer.
const maxHead = 64 << 10

// errMalformedHead is an answer whose head is not HTTP/1.x.
var errMalformedHead = errors.New("malformed HTTP answer")

// readHead reads an answer's status line and headers from br and frames
// its body (RFC 9112 §6.3): by its Content-Length, chunked, or up to the
// end of the connection; none for 1xx, 204 and 304. The answer's Close
// says that the connection can't carry another request, because the
// server said so or the body ends with the connection.
//
// It is net/http's http.ReadResponse made small for the answers of model
// servers: the whole head becomes one string that the header values are
// sliced from, and none of its frames is large, so that reading an answer
// on the handler's goroutine keeps its stack at 8 KiB
// (docs/DESIGN.md, "The stack an open stream holds").
func readHead(br *bufio.Reader) (*http.Response, error) {
	head, err := headText(br)
	if err != nil {
		return nil, err
	}
	resp, lines, err := statusLine(head)
	if err != nil {
		return nil, err
	}
	if resp.Header, err = headers(lines); err != nil {
		return nil, err
	}
	if err := frame(resp, br); err != nil {
		return nil, err
	}
	return resp, nil
}

// headText reads the head up to the empty line that ends it and returns
// it without that line.
func headText(br *bufio.Reader) (string, error) {
	// The usual head came in one read and is whole in br's buffer: it is
	// taken from there, with no copy to gather it.
	if buf, _ := br.Peek(br.Buffered()); len(buf) > 0 {
		if text, n := bufferedHead(buf); n > 0 {
			br.Discard(n)
			return text, nil
		}
	}
	var raw []byte
	for {
		line, err := br.ReadSlice('\n')
		if len(raw)+len(line) > maxHead {
			return "", fmt.Errorf("%w: head longer than %d bytes", errMalformedHead, maxHead)
		}
		switch {
		case err == bufio.ErrBufferFull:
			raw = append(raw, line...)
			continue
		case err == io.EOF && len(raw)+len(line) > 0:
			return "", io.ErrUnexpectedEOF
		case err != nil:
			return "", err
		}
		if (len(line) == 1 || len(line) == 2 && line[0] == '\r') && (len(raw) == 0 || raw[len(raw)-1] == '\n') {
			if len(raw) == 0 {
				return "", fmt.Errorf("%w: no status line", errMalformedHead)
			}
			return string(raw), nil
		}
		if raw == nil {
			raw = make([]byte, 0, 512)
		}
		raw = append(raw, line...)
	}
}

// bufferedHead finds in buf a head that ends with an empty line and
// returns it without that line, and the bytes it took with it; n is 0
// when buf holds no whole head, or one headText must refuse.
func bufferedHead(buf []byte) (text string, n int) {
	for start := 0; start < len(buf); {
		i := bytes.IndexByte(buf[start:], '\n')
		if i < 0 {
			return "", 0
		}
		if line := buf[start : start+i]; len(line) == 0 || len(line) == 1 && line[0] == '\r' {
			if start == 0 {
				return "", 0 // no status line: headText says so
			}
			return string(buf[:start]), start + i + 1
		}
		start += i + 1
	}
	return "", 0
}

// cutLine splits s after its first line, which it returns without its
// line end.
func cutLine(s string) (line, rest string) {
	line, rest, _ = strings.Cut(s, "\n")
	return strings.TrimSuffix(line, "\r"), rest
}

// statusLine reads "HTTP/1.x NNN reason" at the start of head and returns
// the answer it begins and the header lines that follow it.
func statusLine(head string) (*http.Response, string, error) {
	line, rest := cutLine(head)
	if len(line) < 12 || !strings.HasPrefix(line, "HTTP/1.") || line[7] < '0' || line[7] > '9' || line[8] != ' ' || len(line) > 12 && line[12] != ' ' {
		return nil, "", fmt.Errorf("%w: status line %q", errMalformedHead, clipLine(line))
	}
	code, err := strconv.Atoi(line[9:12])
	if err != nil || code < 100 {
		return nil, "", fmt.Errorf("%w: status line %q", errMalformedHead, clipLine(line))
	}
	return &http.Response{Status: line[9:], StatusCode: code, Proto: line[:8], ProtoMajor: 1, ProtoMinor: int(line[7] - '0')}, rest, nil
}

func clipLine(s string) string { return s[:min(len(s), 80)] }

// headers parses the header lines of a head, each value sliced from it.
func headers(lines string) (http.Header, error) {
	n := strings.Count(lines, "\n")
	h := make(http.Header, n)
	vals := make([]string, n) // one array for every header's first value
	for lines != "" {
		var line string
		line, lines = cutLine(lines)
		name, value, ok := strings.Cut(line, ":")
		if !ok || !token(name) || !fieldValue(value) {
			// A folded line (obsolete) or not a header at all.
			return nil, fmt.Errorf("%w: header line %q", errMalformedHead, clipLine(line))
		}
		key := textproto.CanonicalMIMEHeaderKey(name)
		value = strings.Trim(value, " \t")
		if vs, ok := h[key]; ok {
			h[key] = append(vs, value)
			continue
		}
		vals[0] = value
		h[key] = vals[:1:1]
		vals = vals[1:]
	}
	return h, nil
}

// token reports whether s is an RFC 9110 token, as a field name is.
func token(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

// fieldValue reports whether s holds only what a field value may: visible
// characters, spaces, tabs and bytes above 0x7f.
func fieldValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

// frame gives resp the body its headers describe, read from br, and sets
// Close when the connection can't be used again after it.
func frame(resp *http.Response, br *bufio.Reader) error {
	h := resp.Header
	resp.Close = connectionClose(resp)
	code := resp.StatusCode
	if code < 200 || code == http.StatusNoContent || code == http.StatusNotModified {
		resp.Body = http.NoBody
		return nil
	}
	if te, ok := h["Transfer-Encoding"]; ok {
		if len(te) != 1 || !strings.EqualFold(te[0], "chunked") {
			return fmt.Errorf("%w: transfer encoding %q", errMalformedHead, strings.Join(te, ", "))
		}
		// A length beside chunked is ignored, and the connection not
		// trusted again (RFC 9112 §6.3).
		if _, both := h["Content-Length"]; both {
			delete(h, "Content-Length")
			resp.Close = true
		}
		delete(h, "Transfer-Encoding")
		resp.TransferEncoding = []string{"chunked"}
		resp.ContentLength = -1
		resp.Body = &chunkedBody{br: br, r: httputil.NewChunkedReader(br)}
		return nil
	}
	if cl, ok := h["Content-Length"]; ok {
		n, err := strconv.ParseInt(cl[0], 10, 64)
		for _, v := range cl[1:] {
			if v != cl[0] {
				err = errors.New("differing lengths")
			}
		}
		if err != nil || n < 0 {
			return fmt.Errorf("%w: content length %q", errMalformedHead, strings.Join(cl, ", "))
		}
		resp.ContentLength = n
		if n == 0 {
			resp.Body = http.NoBody
			return nil
		}
		resp.Body = &lengthBody{br: br, n: n}
		return nil
	}
	resp.ContentLength = -1
	resp.Close = true
	resp.Body = io.NopCloser(br)
	return nil
}

// connectionClose reports whether the server closes the connection after
// this answer: "Connection: close", or HTTP/1.0 without keep-alive.
func connectionClose(resp *http.Response) bool {
	conn := resp.Header["Connection"]
	has := func(token string) bool {
		for _, v := range conn {
			for t := range strings.SplitSeq(v, ",") {
				if strings.EqualFold(strings.TrimSpace(t), token) {
					return true
				}
			}
		}
		return false
	}
	if resp.ProtoMinor == 0 {
		return !has("keep-alive")
	}
	return has("close")
}

// lengthBody is a body of n bytes.
type lengthBody struct {
	br *bufio.Reader
	n  int64
}

func (b *lengthBody) Read(p []byte) (int, error) {
	if b.n <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > b.n {
		p = p[:b.n]
	}
	n, err := b.br.Read(p)
	b.n -= int64(n)
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

func (b *lengthBody) Close() error { return nil }

// chunkedBody is a chunked body: httputil's reader of the chunks, and the
// trailer after the last one, read so that the connection is at the next
// answer when the body says io.EOF.
type chunkedBody struct {
	br *bufio.Reader
	r  io.Reader
}

func (b *chunkedBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err == io.EOF {
		if terr := skipTrailer(b.br); terr != nil {
			return n, terr
		}
	}
	return n, err
}

func (b *chunkedBody) Close() error { return nil }

// skipTrailer reads the trailer fields after a chunked body's last chunk
// up to the empty line that ends the body.
func skipTrailer(br *bufio.Reader) error {
	for {
		line, err := br.ReadSlice('\n')
		if err == io.EOF {
			return io.ErrUnexpectedEOF
		}
		if err != nil {
			return err
		}
		if len(line) == 1 || len(line) == 2 && line[0] == '\r' {
			return nil
		}
	}
}
