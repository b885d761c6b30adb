package upstream

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

// readAll reads one answer from raw through a read buffer of size bytes:
// its status, headers, body, whether the connection closes after it, and
// what is left of raw after it.
func readAll(raw string, size int) (resp *http.Response, body string, rest string, err error) {
	br := bufio.NewReaderSize(strings.NewReader(raw), size)
	resp, err = readAnswer(br)
	if err != nil {
		return nil, "", "", err
	}
	b, err := io.ReadAll(resp.Body)
	left, _ := io.ReadAll(br)
	return resp, string(b), string(left), err
}

// readHead frames answers as net/http's client does, and refuses what it
// can't frame.
func TestReadHead(t *testing.T) {
	const next = "HTTP/1.1 200 OK\r\n\r\n" // what follows on the connection
	for _, tt := range []struct {
		name, raw string
		code      int
		header    http.Header
		body      string
		close     bool
		rest      string
		err       error // errMalformedHead, io.ErrUnexpectedEOF
	}{
		{name: "length", raw: "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}" + next,
			code: 200, header: http.Header{"Content-Type": {"application/json"}, "Content-Length": {"2"}}, body: "{}", rest: next},
		{name: "lower-case names, bare LF, spaces", raw: "HTTP/1.1 400 Bad Request\ncontent-length:  3 \nx-a: 1\nx-a: 2\n\nabc",
			code: 400, header: http.Header{"Content-Length": {"3"}, "X-A": {"1", "2"}}, body: "abc"},
		{name: "chunked with trailer", raw: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\ndata:\r\n1;ext=1\r\n!\r\n0\r\nX-T: 1\r\n\r\n" + next,
			code: 200, header: http.Header{}, body: "data:!", rest: next},
		{name: "chunked and a length", raw: "HTTP/1.1 200 OK\r\nTransfer-Encoding: Chunked\r\nContent-Length: 99\r\n\r\n1\r\na\r\n0\r\n\r\n",
			code: 200, header: http.Header{}, body: "a", close: true},
		{name: "to the end", raw: "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\ndata: 1\n\n",
			code: 200, header: http.Header{"Content-Type": {"text/event-stream"}}, body: "data: 1\n\n", close: true},
		{name: "close", raw: "HTTP/1.1 200 OK\r\nConnection: keep-alive, Close\r\nContent-Length: 0\r\n\r\n",
			code: 200, header: http.Header{"Connection": {"keep-alive, Close"}, "Content-Length": {"0"}}, close: true},
		{name: "1.0", raw: "HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\nx", code: 200, header: http.Header{"Content-Length": {"1"}}, body: "x", close: true},
		{name: "1.0 keep-alive", raw: "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 1\r\n\r\nx", code: 200,
			header: http.Header{"Connection": {"keep-alive"}, "Content-Length": {"1"}}, body: "x"},
		{name: "no body for 204", raw: "HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n" + next, code: 204,
			header: http.Header{"Content-Length": {"5"}}, rest: next},
		{name: "no reason", raw: "HTTP/1.1 503\r\nRetry-After: 2\r\nContent-Length: 0\r\n\r\n", code: 503,
			header: http.Header{"Retry-After": {"2"}, "Content-Length": {"0"}}},
		{name: "informational first", raw: "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n", code: 201,
			header: http.Header{"Content-Length": {"0"}}},

		{name: "cut length", raw: "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", err: io.ErrUnexpectedEOF},
		{name: "cut chunk", raw: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab", err: io.ErrUnexpectedEOF},
		{name: "cut before the trailer's end", raw: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n", err: io.ErrUnexpectedEOF},
		{name: "cut head", raw: "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n", err: io.ErrUnexpectedEOF},
		{name: "not HTTP", raw: "SSH-2.0-OpenSSH\r\n\r\n", err: errMalformedHead},
		{name: "HTTP/2 status line", raw: "HTTP/2 200\r\n\r\n", err: errMalformedHead},
		{name: "short code", raw: "HTTP/1.1 20 OK\r\n\r\n", err: errMalformedHead},
		{name: "code run on", raw: "HTTP/1.1 2000 OK\r\n\r\n", err: errMalformedHead},
		{name: "folded header", raw: "HTTP/1.1 200 OK\r\nX-A: 1\r\n  2\r\nContent-Length: 0\r\n\r\n", err: errMalformedHead},
		{name: "space in a name", raw: "HTTP/1.1 200 OK\r\nX A: 1\r\n\r\n", err: errMalformedHead},
		{name: "no colon", raw: "HTTP/1.1 200 OK\r\nnonsense\r\n\r\n", err: errMalformedHead},
		{name: "differing lengths", raw: "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", err: errMalformedHead},
		{name: "negative length", raw: "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", err: errMalformedHead},
		{name: "gzip encoding", raw: "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", err: errMalformedHead},
		{name: "empty line first", raw: "\r\nHTTP/1.1 200 OK\r\n\r\n", err: errMalformedHead},
		{name: "head too long", raw: "HTTP/1.1 200 OK\r\nX-Long: " + strings.Repeat("a", maxHead) + "\r\n\r\n", err: errMalformedHead},
	} {
		// A head whole in the read buffer, and one read in pieces.
		for _, size := range []int{16, 4096} {
			t.Run(fmt.Sprintf("%s/%d", tt.name, size), func(t *testing.T) {
				resp, body, rest, err := readAll(tt.raw, size)
				if tt.err != nil {
					if !errors.Is(err, tt.err) {
						t.Fatalf("read = %v; want %v", err, tt.err)
					}
					return
				}
				if err != nil {
					t.Fatalf("read = %v", err)
				}
				if resp.StatusCode != tt.code || !reflect.DeepEqual(resp.Header, tt.header) || body != tt.body || resp.Close != tt.close || rest != tt.rest {
					t.Errorf("got %d %v body %q close %v rest %q;\nwant %d %v body %q close %v rest %q",
						resp.StatusCode, resp.Header, body, resp.Close, rest, tt.code, tt.header, tt.body, tt.close, tt.rest)
				}
			})
		}
	}
}

// What readHead takes, net/http's http.ReadResponse takes alike: the same
// status, headers and body.
func FuzzReadHead(f *testing.F) {
	for _, s := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
		"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nRetry-After: 1\r\n\r\n{\"error\":\"busy\"}",
		"HTTP/1.0 200 OK\r\n\r\nall of it",
		"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n",
		"HTTP/1.1 200 OK\nX: a\nX: b\n\n",
		"HTTP/1.0 200\n\":\n\n", // a name that is not a token: found by the fuzzer
	} {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, raw string, small bool) {
		size := 4096
		if small {
			size = 16
		}
		resp, body, _, err := readAll(raw, size)
		if err != nil {
			return
		}
		want, werr := http.ReadResponse(bufio.NewReader(strings.NewReader(raw)), nil)
		if werr == nil && want.StatusCode/100 == 1 && want.StatusCode != 101 {
			return // informational: net/http's client skips it, as readAnswer does; ReadResponse does not
		}
		if werr != nil {
			t.Fatalf("readHead took %q, http.ReadResponse refused it: %v", raw, werr)
		}
		wbody, werr := io.ReadAll(want.Body)
		if werr != nil {
			t.Fatalf("readHead read %q's body, http.ReadResponse's body failed: %v", raw, werr)
		}
		delete(want.Header, "Transfer-Encoding")
		if want.TransferEncoding != nil {
			delete(want.Header, "Content-Length")
		}
		if want.StatusCode != resp.StatusCode || !bytes.Equal(wbody, []byte(body)) || !reflect.DeepEqual(want.Header, resp.Header) {
			t.Fatalf("%q: readHead %d %v %q; http.ReadResponse %d %v %q", raw, resp.StatusCode, resp.Header, body, want.StatusCode, want.Header, wbody)
		}
	})
}
