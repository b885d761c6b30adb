package upstream

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// h1 sends the requests of one plain-HTTP upstream host over kept-alive
// HTTP/1.1 connections, doing all of a request's work on the caller's
// goroutine (docs/DESIGN.md, "Shared transport"). net/http's Transport
// keeps two goroutines per connection, one writing requests and one
// reading answers, and hands every request and answer between them and
// the caller over channels: three goroutine wake-ups a request, and two
// goroutine stacks and a 4 KiB write buffer per open stream. Here the
// caller writes the request in one write, reads the status line and
// headers (readHead) and then the body itself; the connection goes back
// to the idle list when the body has been read to its end. Safe for
// concurrent use.
type h1 struct {
	addr     string // host:port, dialled
	host     string // the Host header
	dial     func(ctx context.Context, network, addr string) (net.Conn, error)
	header   time.Duration // ResponseHeaderTimeout
	maxIdle  int
	idleFor  time.Duration // an idle connection older than this is closed
	now      func() time.Time
	stale    func(*h1Conn) bool // whether an idle connection was closed by the server
	mu       sync.Mutex
	idle     []*h1Conn // most recently used last
	sweeping bool      // a sweep of idle connections is scheduled
}

// h1Conn is one connection of an h1.
type h1Conn struct {
	nc        net.Conn
	br        *bufio.Reader
	idleSince time.Time
	peer      peer // closedByPeer's
}

// h1ReadSize is each connection's read buffer. The head is read through it
// (a longer one in pieces), and the size line of every chunk; a reader
// that asks for more than it holds (the adapters read 4 KiB at a time)
// gets a chunk's data straight from the connection. net/http's is 4 KiB,
// held by every open stream beside the adapter's own.
const h1ReadSize = 1 << 10

// h1OneWrite is the largest body copied behind the request's headers to go
// out in one write; a larger one is written with them by one writev.
const h1OneWrite = 16 << 10

// newH1 returns the client of the host of baseURL ("http://host:port/..."),
// or nil when net/http must send its requests: another scheme (https), a
// user in the URL, or a host it does not parse.
func newH1(baseURL string, s Settings, dial func(ctx context.Context, network, addr string) (net.Conn, error)) *h1 {
	u, err := url.Parse(baseURL)
	if err != nil || u.Scheme != "http" || u.User != nil || u.Host == "" || u.Opaque != "" {
		return nil
	}
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "80")
	}
	return &h1{addr: addr, host: u.Host, dial: dial, header: s.ResponseHeaderTimeout, maxIdle: s.MaxIdleConnsPerHost,
		idleFor: idleConnTimeout, now: time.Now, stale: closedByPeer}
}

// idleConnTimeout is how long an idle connection is kept, as net/http's
// Transport of the pool keeps its own.
const idleConnTimeout = 90 * time.Second

// send sends c to the server and returns its answer once the status line
// and headers arrived. Errors are *url.Error, as net/http's client
// returns them. A request whose kept-alive connection turns out to have
// been closed by the server before any byte of an answer (a server's idle
// timeout: llama-server closes a connection idle for 5 s) is sent once
// more on a new connection: the server never saw it.
func (h *h1) send(ctx context.Context, c Call) (*http.Response, error) {
	base := basePath(c)
	if err := checkCall(c, base); err != nil {
		return nil, &url.Error{Op: urlOp(c.Method), URL: c.target(), Err: err}
	}
	for {
		cn, reused, err := h.conn(ctx)
		if err != nil {
			return nil, urlError(ctx, c, err)
		}
		resp, err := h.roundTrip(ctx, cn, c, base)
		if err == nil {
			return resp, nil
		}
		cn.nc.Close()
		if errors.Is(err, errNothingAnswered) && reused && ctx.Err() == nil {
			continue // the next conn is a fresher idle one, or a new one
		}
		return nil, urlError(ctx, c, err)
	}
}

// errNothingAnswered marks a failure before any byte of the answer: the
// request may be sent again on another connection when this one was
// reused.
var errNothingAnswered = errors.New("connection closed before an answer")

// urlError is err as net/http's client returns a failed request's: a
// *url.Error naming c's method and URL, with the context's error when it
// is done.
func urlError(ctx context.Context, c Call, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		err = ctxErr
	}
	return &url.Error{Op: urlOp(c.Method), URL: c.target(), Err: err}
}

// urlOp is the operation net/http's client names in its *url.Error: the
// method with only its first letter upper case ("Post").
func urlOp(method string) string {
	if method == "" {
		return "Get"
	}
	return method[:1] + strings.ToLower(method[1:])
}

// basePath is the path of c's base URL, without its last slash: the
// request target is it and c.Path.
func basePath(c Call) string {
	base := c.URL
	if i := strings.Index(base, "://"); i >= 0 {
		base = base[i+3:]
	}
	if i := strings.IndexByte(base, '/'); i >= 0 {
		return strings.TrimRight(base[i:], "/")
	}
	return ""
}

// checkCall refuses a call whose method, path or header values can't go
// on the wire as they are: a byte there that ends a line would start a
// header or a request of its own.
func checkCall(c Call, base string) error {
	switch {
	case c.Method != "" && !token(c.Method):
		return fmt.Errorf("method %q is not a token", c.Method)
	case !requestTarget(base) || !requestTarget(c.Path):
		return fmt.Errorf("path %q is not a request target", c.URL+c.Path)
	case !fieldValue(c.Accept) || !fieldValue(c.APIKey):
		return errors.New("a header value holds a control character")
	}
	return nil
}

// requestTarget reports whether s may be part of a request line's target:
// no spaces, no control characters.
func requestTarget(s string) bool {
	for i := 0; i < len(s); i++ {
		if b := s[i]; b <= ' ' || b == 0x7f {
			return false
		}
	}
	return true
}

// roundTrip writes c, whose base URL's path is base, on cn and reads the
// answer's head. On success the answer's body owns cn; on failure the
// caller closes cn.
func (h *h1) roundTrip(ctx context.Context, cn *h1Conn, c Call, base string) (*http.Response, error) {
	// A cancelled request closes its connection, which ends a blocked
	// write or read at once; the body's end stops this.
	stop := context.AfterFunc(ctx, func() { cn.nc.Close() })
	if err := h.write(cn.nc, c, base); err != nil {
		stop()
		return nil, fmt.Errorf("%w: %w", errNothingAnswered, err)
	}
	if h.header > 0 {
		cn.nc.SetReadDeadline(h.now().Add(h.header))
	}
	if _, err := cn.br.Peek(1); err != nil {
		stop()
		if isTimeout(err) && ctx.Err() == nil {
			return nil, headerTimeout{h.header}
		}
		return nil, fmt.Errorf("%w: %w", errNothingAnswered, err)
	}
	resp, err := readAnswer(cn.br)
	if h.header > 0 && err == nil {
		err = cn.nc.SetReadDeadline(time.Time{})
	}
	if err != nil {
		stop()
		return nil, err
	}
	resp.Body = &h1Body{r: resp.Body, h: h, cn: cn, stop: stop, keep: !resp.Close, ctx: ctx}
	return resp, nil
}

// readAnswer reads an answer's head, skipping informational answers
// (1xx other than 101), as net/http's client does.
func readAnswer(br *bufio.Reader) (*http.Response, error) {
	for {
		resp, err := readHead(br)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode < 100 || resp.StatusCode >= 200 || resp.StatusCode == http.StatusSwitchingProtocols {
			return resp, nil
		}
	}
}

// headerTimeout is the failure of a server that sent no answer's head
// within ResponseHeaderTimeout; like net/http's, it is a net.Error whose
// Timeout is true.
type headerTimeout struct{ after time.Duration }

func (e headerTimeout) Error() string {
	return fmt.Sprintf("timeout awaiting response headers (%v)", e.after)
}
func (headerTimeout) Timeout() bool   { return true }
func (headerTimeout) Temporary() bool { return true }

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// heads holds the buffers requests are written from, between writes.
var heads = sync.Pool{New: func() any { b := make([]byte, 0, 2<<10); return &b }}

// write writes c's request line, headers and body, in one write when the
// body is small.
func (h *h1) write(nc net.Conn, c Call, base string) error {
	method := c.Method
	if method == "" {
		method = http.MethodGet
	}
	box := heads.Get().(*[]byte)
	defer func() {
		if cap(*box) <= 2*h1OneWrite {
			heads.Put(box)
		}
	}()
	head := (*box)[:0]
	head = append(head, method...)
	head = append(head, ' ')
	if base != "" || c.Path != "" {
		head = append(head, base...)
		head = append(head, c.Path...)
	} else {
		head = append(head, '/')
	}
	head = append(head, " HTTP/1.1\r\nHost: "...)
	head = append(head, h.host...)
	head = append(head, "\r\nUser-Agent: Go-http-client/1.1\r\n"...)
	if c.Body != nil {
		head = append(head, "Content-Type: application/json\r\nContent-Length: "...)
		head = strconv.AppendInt(head, int64(len(c.Body)), 10)
		head = append(head, "\r\n"...)
	}
	if c.Accept != "" {
		head = append(head, "Accept: "...)
		head = append(head, c.Accept...)
		head = append(head, "\r\n"...)
	}
	if c.APIKey != "" {
		head = append(head, "Authorization: Bearer "...)
		head = append(head, c.APIKey...)
		head = append(head, "\r\n"...)
	}
	head = append(head, "\r\n"...)
	var err error
	if len(c.Body) <= h1OneWrite {
		head = append(head, c.Body...)
		_, err = nc.Write(head)
	} else {
		bufs := net.Buffers{head, c.Body}
		_, err = bufs.WriteTo(nc)
	}
	*box = head
	return err
}

// conn returns an idle connection that the server has not closed, or a
// new one; reused says which.
func (h *h1) conn(ctx context.Context) (cn *h1Conn, reused bool, err error) {
	for {
		h.mu.Lock()
		n := len(h.idle)
		if n == 0 {
			h.mu.Unlock()
			break
		}
		cn = h.idle[n-1]
		h.idle[n-1] = nil
		h.idle = h.idle[:n-1]
		h.mu.Unlock()
		if cn.br.Buffered() == 0 && h.now().Sub(cn.idleSince) < h.idleFor && !h.stale(cn) {
			return cn, true, nil
		}
		cn.nc.Close()
	}
	nc, err := h.dialAside(ctx)
	if err != nil {
		return nil, false, err
	}
	return &h1Conn{nc: nc, br: bufio.NewReaderSize(nc, h1ReadSize)}, false, nil
}

// dialAside dials on a goroutine of its own, which ends with the dial: the
// resolver's and the dialer's frames would grow the caller's stack beyond
// 8 KiB for as long as its stream stays open (docs/DESIGN.md, "The stack
// an open stream holds"). A kept-alive connection is dialled once for
// many requests, so the hand-over is rare.
func (h *h1) dialAside(ctx context.Context) (net.Conn, error) {
	type dialled struct {
		nc  net.Conn
		err error
	}
	ch := make(chan dialled, 1)
	go func() {
		nc, err := h.dial(ctx, "tcp", h.addr)
		ch <- dialled{nc, err}
	}()
	d := <-ch
	return d.nc, d.err
}

// put takes cn back as idle, or closes it when the list is full.
func (h *h1) put(cn *h1Conn) {
	cn.idleSince = h.now()
	h.mu.Lock()
	if len(h.idle) >= h.maxIdle {
		h.mu.Unlock()
		cn.nc.Close()
		return
	}
	h.idle = append(h.idle, cn)
	sweep := !h.sweeping
	h.sweeping = true
	h.mu.Unlock()
	if sweep {
		time.AfterFunc(h.idleFor, h.sweep)
	}
}

// sweep closes the connections idle for idleFor, and comes back when the
// oldest of those left will be.
func (h *h1) sweep() {
	now := h.now()
	h.mu.Lock()
	i := 0
	for i < len(h.idle) && now.Sub(h.idle[i].idleSince) >= h.idleFor {
		h.idle[i].nc.Close()
		i++
	}
	h.idle = append(h.idle[:0], h.idle[i:]...)
	var next time.Duration
	if len(h.idle) > 0 {
		next = h.idleFor - now.Sub(h.idle[0].idleSince) // the oldest left, idle first
	}
	h.sweeping = next > 0
	h.mu.Unlock()
	if next > 0 {
		time.AfterFunc(next, h.sweep)
	}
}

// closeIdle closes the idle connections.
func (h *h1) closeIdle() {
	h.mu.Lock()
	idle := h.idle
	h.idle = nil
	h.mu.Unlock()
	for _, cn := range idle {
		cn.nc.Close()
	}
}

// h1Body is an answer's body. Read to its end, it gives its connection
// back to the idle list (unless the server said it closes it); closed
// before, or broken, it closes the connection. Close is safe to call
// while a Read is blocked: it closes the connection, which ends the Read.
type h1Body struct {
	r    io.ReadCloser // http.ReadResponse's body
	h    *h1
	cn   *h1Conn
	ctx  context.Context
	stop func() bool // stops the cancellation of roundTrip
	keep bool
	done atomic.Bool
}

func (b *h1Body) Read(p []byte) (int, error) {
	if b.done.Load() {
		return 0, io.EOF
	}
	n, err := b.r.Read(p)
	switch {
	case err == io.EOF:
		b.finish(true)
	case err != nil:
		if ctxErr := b.ctx.Err(); ctxErr != nil {
			err = ctxErr
		}
		b.finish(false)
	}
	return n, err
}

func (b *h1Body) Close() error {
	b.finish(false)
	return nil
}

// finish ends the body once: with clean, the body was read to its end.
func (b *h1Body) finish(clean bool) {
	if !b.done.CompareAndSwap(false, true) {
		return
	}
	if b.stop() && clean && b.keep {
		b.h.put(b.cn)
		return
	}
	b.cn.nc.Close()
}
