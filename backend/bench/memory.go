package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/switchyard/switchyard/backend/experiment"
	"github.com/switchyard/switchyard/backend/fleet"
	"github.com/switchyard/switchyard/backend/simfleet"
)

// MemoryResult is the memory of Streams streams held open mid-answer,
// through each path. Heap+stack is runtime.MemStats HeapAlloc+StackInuse
// after a full collection: live memory, the figure the goal is about. RSS
// is /proc/self/status VmRSS after returning free memory to the OS
// (debug.FreeOSMemory); it includes what the runtime keeps mapped and is
// noisier. The client, the simulated servers and Switchyard share this
// process, so a path's own cost per stream is its growth less the direct
// path's (which has the client and the servers, and nothing in between).
type MemoryResult struct {
	Streams int `json:"streams"`
	// FDLimit is RLIMIT_NOFILE as the run had it (raised when needed).
	FDLimit    uint64    `json:"fd_limit"`
	Direct     MemSample `json:"direct"`
	Proxy      MemSample `json:"proxy"`
	Switchyard MemSample `json:"switchyard"`
	// Per stream, beyond the direct path, in bytes.
	SwitchyardPerStream    float64 `json:"switchyard_per_stream"`
	ProxyPerStream         float64 `json:"proxy_per_stream"`
	SwitchyardRSSPerStream float64 `json:"switchyard_rss_per_stream"`
	ProxyRSSPerStream      float64 `json:"proxy_rss_per_stream"`
}

// MemSample is the process's memory idle and with the streams open.
type MemSample struct {
	IdleHeapStack  uint64 `json:"idle_heap_stack"`
	OpenHeapStack  uint64 `json:"open_heap_stack"`
	IdleRSS        uint64 `json:"idle_rss"`
	OpenRSS        uint64 `json:"open_rss"`
	IdleGoroutines int    `json:"idle_goroutines"`
	OpenGoroutines int    `json:"open_goroutines"`
	// IdleStack and OpenStack are the goroutines' stacks (StackInuse),
	// part of heap+stack.
	IdleStack    uint64  `json:"idle_stack"`
	OpenStack    uint64  `json:"open_stack"`
	PerStream    float64 `json:"per_stream"`     // heap+stack growth / streams
	RSSPerStream float64 `json:"rss_per_stream"` // RSS growth / streams
	OpenSeconds  float64 `json:"open_s"`         // time to open them all
}

// streamsPerServer keeps each slow server under the 64 connections per
// upstream host of Switchyard's transport pool (upstream.Settings).
const streamsPerServer = 60

func (b *bencher) memory(ctx context.Context) error {
	n := b.sz.Streams
	limit, err := raiseFDLimit(uint64(4*n + 512)) // client, Switchyard (2) and server ends
	res := &MemoryResult{Streams: n, FDLimit: limit}
	if err != nil {
		return fmt.Errorf("file descriptors: %w", err)
	}

	// Slow servers: the first token at once, then a token an hour.
	servers := (n + streamsPerServer - 1) / streamsPerServer
	members := make([]simfleet.Member, servers)
	for i := range members {
		id := fmt.Sprintf("slow-%02d", i+1)
		members[i] = simfleet.Member{ID: id, Priority: i + 1, Config: simfleet.Config{
			Provider: fleet.ProviderOpenAI, Models: []simfleet.Model{{Name: id}},
			TTFT: simfleet.FastTTFT, TokenGap: time.Hour, Tokens: 4,
		}}
	}
	f, err := simfleet.StartFleet(members)
	if err != nil {
		return err
	}
	defer f.Close()
	cands := f.Candidates()
	bodies := make([][]byte, servers)
	for i, c := range cands {
		bodies[i] = experiment.ChatBody(c.ID, true)
	}
	serverOf := func(i int) int { return i % servers }

	// The bare proxy routes /slow-NN/v1/... to server slow-NN.
	upstreams := make(map[string]*url.URL, servers)
	for _, c := range cands {
		u, _ := url.Parse(c.URL)
		upstreams[c.ID] = &url.URL{Scheme: u.Scheme, Host: u.Host}
	}
	px, err := startProxyFunc(func(out *url.URL) {
		id, rest, _ := strings.Cut(strings.TrimPrefix(out.Path, "/"), "/")
		if u := upstreams[id]; u != nil {
			out.Scheme, out.Host, out.Path = u.Scheme, u.Host, "/"+rest
		}
	})
	if err != nil {
		return err
	}
	defer px.close()
	sy, err := experiment.StartSwitchyard(ctx, experiment.Setup{
		Selection: map[string]string{"stall_timeout": "10m"}, DefaultModel: cands[0].ID, Candidates: cands, TempDir: b.o.TempDir,
	})
	if err != nil {
		return err
	}
	defer sy.Close()

	idle := func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		for _, c := range cands {
			if err := f.Server(c.ID).WaitIdle(ctx); err != nil {
				return fmt.Errorf("%s still has open streams: %w", c.ID, err)
			}
		}
		return nil
	}
	measure := func(name string, url func(i int) string) (MemSample, error) {
		b.o.Logf("  %d streams %s", n, name)
		hc := &http.Client{Transport: &http.Transport{Proxy: nil, DisableCompression: true, MaxIdleConnsPerHost: 64}}
		defer hc.CloseIdleConnections()
		s, err := holdStreams(ctx, n, func(ctx context.Context, i int) (io.Closer, error) {
			return openStream(ctx, hc, url(i), bodies[serverOf(i)])
		})
		if err != nil {
			return s, fmt.Errorf("%s: %w", name, err)
		}
		hc.CloseIdleConnections()
		return s, idle(ctx)
	}
	if res.Direct, err = measure("direct", func(i int) string { return cands[serverOf(i)].URL + "/chat/completions" }); err != nil {
		return err
	}
	if res.Proxy, err = measure("through the bare proxy", func(i int) string {
		return px.url() + "/" + cands[serverOf(i)].ID + "/v1/chat/completions"
	}); err != nil {
		return err
	}
	if res.Switchyard, err = measure("through Switchyard", func(int) string { return sy.URL() + "/v1/chat/completions" }); err != nil {
		return err
	}
	res.SwitchyardPerStream = res.Switchyard.PerStream - res.Direct.PerStream
	res.ProxyPerStream = res.Proxy.PerStream - res.Direct.PerStream
	res.SwitchyardRSSPerStream = res.Switchyard.RSSPerStream - res.Direct.RSSPerStream
	res.ProxyRSSPerStream = res.Proxy.RSSPerStream - res.Direct.RSSPerStream
	b.rep.Memory = res
	return nil
}

// holdStreams opens n streams with open (at most 50 opening at once),
// reads the process's memory with all of them open, closes them, and
// returns the sample. Memory is read idle before and open after a full
// collection.
func holdStreams(ctx context.Context, n int, open func(ctx context.Context, i int) (io.Closer, error)) (MemSample, error) {
	var s MemSample
	s.IdleHeapStack, s.IdleStack, s.IdleRSS, s.IdleGoroutines = readMemory()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	streams := make([]io.Closer, n)
	defer func() {
		cancel()
		for _, st := range streams {
			if st != nil {
				st.Close()
			}
		}
	}()
	start := time.Now()
	sem := make(chan struct{}, 50)
	var mu sync.Mutex
	var first error
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			st, err := open(ctx, i)
			mu.Lock()
			defer mu.Unlock()
			if err != nil && first == nil {
				first = fmt.Errorf("stream %d: %w", i, err)
				cancel()
			}
			streams[i] = st
		})
	}
	wg.Wait()
	if first != nil {
		return s, first
	}
	s.OpenSeconds = time.Since(start).Seconds()
	s.OpenHeapStack, s.OpenStack, s.OpenRSS, s.OpenGoroutines = readMemory()
	s.PerStream = (float64(s.OpenHeapStack) - float64(s.IdleHeapStack)) / float64(n)
	s.RSSPerStream = (float64(s.OpenRSS) - float64(s.IdleRSS)) / float64(n)
	return s, nil
}

// readMemory collects garbage, returns free memory to the OS and reads
// live heap+stack and the stacks alone, RSS and the number of goroutines.
func readMemory() (heapStack, stack, rss uint64, goroutines int) {
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc + ms.StackInuse, ms.StackInuse, vmRSS(), runtime.NumGoroutine()
}

// vmRSS is the process's resident set size from /proc/self/status, 0
// where there is no such file.
func vmRSS() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// stream is an answer held open after its first token.
type stream struct {
	body   io.ReadCloser
	cancel context.CancelFunc
}

func (s *stream) Close() error {
	s.cancel()
	return s.body.Close()
}

// openStream sends a streamed chat request and returns once an event with
// content arrived, leaving the rest of the answer unread.
func openStream(ctx context.Context, hc *http.Client, url string, body []byte) (io.Closer, error) {
	ctx, cancel := context.WithCancel(ctx)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		cancel()
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		cancel()
		return nil, err
	}
	st := &stream{body: resp.Body, cancel: cancel}
	if resp.StatusCode != http.StatusOK {
		st.Close()
		return nil, fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	br := bufio.NewReader(resp.Body)
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			st.Close()
			return nil, fmt.Errorf("stream ended before its first token: %w", err)
		}
		data, ok := bytes.CutPrefix(bytes.TrimSpace(line), []byte("data:"))
		if !ok {
			continue
		}
		var ev struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if json.Unmarshal(bytes.TrimSpace(data), &ev) == nil && len(ev.Choices) > 0 && ev.Choices[0].Delta.Content != "" {
			return st, nil
		}
		if bytes.Contains(data, []byte(`"error"`)) {
			st.Close()
			return nil, errors.New("error event before the first token")
		}
	}
}
