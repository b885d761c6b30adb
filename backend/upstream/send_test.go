package upstream

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"testing"

	"github.com/switchyard/switchyard/backend/fleet"
)

// Send's one rule for both adapters: a 2xx is the answer, any other status
// a *fleet.StatusError, redirects not followed.
func TestSendStatuses(t *testing.T) {
	var elsewhere atomic.Int32 // requests that followed a redirect
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/200":
			io.WriteString(w, `{"ok":true}`)
		case "/204":
			w.WriteHeader(http.StatusNoContent)
		case "/301", "/307":
			http.Redirect(w, r, "/elsewhere", map[string]int{"/301": 301, "/307": 307}[r.URL.Path])
		case "/304":
			w.WriteHeader(http.StatusNotModified)
		case "/101":
			conn, buf, _ := http.NewResponseController(w).Hijack()
			buf.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: other\r\n\r\n")
			buf.Flush()
			conn.Close()
		case "/400":
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `{"error":{"message":"bad field"}}`)
		case "/503":
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, `{"error":"server busy, please try again.  maximum pending requests exceeded"}`)
		case "/elsewhere":
			elsewhere.Add(1)
		}
	}))
	defer ts.Close()
	p := NewPool(Settings{})
	for _, tt := range []struct {
		path string
		want int // 0: answered; else the StatusError's status
		busy bool
	}{
		{"/200", 0, false},
		{"/204", 0, false},
		{"/101", 101, false},
		{"/301", 301, false},
		{"/304", 304, false},
		{"/307", 307, false},
		{"/400", 400, false},
		{"/503", 503, true},
	} {
		resp, err := p.Send(context.Background(), Call{Method: http.MethodPost, URL: ts.URL + "/", Path: tt.path, Body: []byte(`{}`)})
		if resp != nil {
			resp.Body.Close()
		}
		se, isStatus := errors.AsType[*fleet.StatusError](err)
		switch {
		case tt.want == 0 && err != nil:
			t.Errorf("Send(%s) = %v; want the answer", tt.path, err)
		case tt.want != 0 && (!isStatus || se.StatusCode != tt.want || se.Busy != tt.busy):
			t.Errorf("Send(%s) = %v (%#v); want a StatusError %d, busy %v", tt.path, err, se, tt.want, tt.busy)
		}
	}
	if n := elsewhere.Load(); n != 0 {
		t.Errorf("%d redirects followed; want none", n)
	}
	if se, _ := errors.AsType[*fleet.StatusError](sendErr(p, ts.URL+"/400")); se == nil || se.Message != "bad field" {
		t.Errorf("Send(/400) message = %+v; want the server's", se)
	}
}

func sendErr(p *Pool, u string) error {
	_, err := p.Send(context.Background(), Call{Method: http.MethodGet, URL: u})
	return err
}

// What every request carries: the key as a bearer token, the JSON body's
// type and the answer's, and never the replay marker.
func TestSendHeaders(t *testing.T) {
	got := make(chan http.Header, 2)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Clone()
	}))
	defer ts.Close()
	p := NewPool(Settings{})
	resp, err := p.Send(context.Background(), Call{Method: http.MethodPost, URL: ts.URL, Path: "/x", APIKey: "k", Body: []byte(`{}`), Accept: "text/event-stream"})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	h := <-got
	for k, want := range map[string]string{"Authorization": "Bearer k", "Content-Type": "application/json", "Accept": "text/event-stream", "X-Idempotency-Key": ""} {
		if h.Get(k) != want {
			t.Errorf("%s = %q; want %q", k, h.Get(k), want)
		}
	}
	resp, err = p.Send(context.Background(), Call{Method: http.MethodGet, URL: ts.URL, Path: "/models"})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if h := <-got; h.Get("Authorization") != "" || h.Get("Content-Type") != "" {
		t.Errorf("GET without key or body sent Authorization %q, Content-Type %q", h.Get("Authorization"), h.Get("Content-Type"))
	}
}

// A server that is not there is the client's *url.Error, naming the URL.
func TestSendTransportError(t *testing.T) {
	ts := httptest.NewServer(http.NotFoundHandler())
	u := ts.URL
	ts.Close()
	_, err := NewPool(Settings{}).Send(context.Background(), Call{Method: http.MethodPost, URL: u, Path: "/api/chat", Body: []byte(`{}`)})
	if ue, ok := errors.AsType[*url.Error](err); !ok || ue.URL != u+"/api/chat" {
		t.Errorf("Send(dead port) = %v; want a *url.Error for %s/api/chat", err, u)
	}
}
