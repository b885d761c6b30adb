package httpapi

import (
	"container/list"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"
)

// storeSettings bound a responseStore. A zero field means its default.
type storeSettings struct {
	// MaxEntries is the most entries kept: output items, and the
	// conversations of responses (each one entry). Default 10,000.
	MaxEntries int
	// MaxBytes bounds the JSON of the entries kept. A conversation counts
	// whole, though it may share its items with other entries: the memory
	// held is at most this, and the maps' and list's own. Default 64 MiB.
	MaxBytes int64
	// MaxAge is how long an entry is kept after it was last stored or
	// used. Default 1 hour.
	MaxAge time.Duration
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// responseStore keeps, in memory, what the responses Switchyard made are
// made of, so that a later request can name one of their items
// (item_reference) or go on from one of them (previous_response_id), as
// it can at OpenAI (docs/API.md, "POST /v1/responses"). It holds two kinds
// of entry: an output item, by its id, and the conversation of a
// response, its input items then its output items, by the response's id.
// The entry unused longest is dropped first, when there are more entries
// or bytes than the settings allow, and any entry unused for MaxAge.
//
// A responseStore is safe for concurrent use. The items it returns are
// shared: they must not be modified.
type responseStore struct {
	set storeSettings

	mu            sync.Mutex
	items         map[string]*list.Element // output item id → its entry
	conversations map[string]*list.Element // response id → its entry
	lru           list.List                // of *storeEntry, least recently used first
	bytes         int64                    // the JSON of the entries
}

// storeEntry is one output item, or the conversation of one response.
type storeEntry struct {
	id           string
	conversation bool
	items        []json.RawMessage
	size         int64
	used         time.Time
}

func newResponseStore(set storeSettings) *responseStore {
	if set.MaxEntries <= 0 {
		set.MaxEntries = 10_000
	}
	if set.MaxBytes <= 0 {
		set.MaxBytes = 64 << 20
	}
	if set.MaxAge <= 0 {
		set.MaxAge = time.Hour
	}
	if set.Now == nil {
		set.Now = time.Now
	}
	return &responseStore{set: set, items: make(map[string]*list.Element), conversations: make(map[string]*list.Element)}
}

// keep stores the response id: its output items, each by its id, and its
// conversation, input then output. It replaces entries of the same ids.
func (st *responseStore) keep(id string, input, output []json.RawMessage) {
	st.mu.Lock()
	defer st.mu.Unlock()
	now := st.set.Now()
	for _, raw := range output {
		var item struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(raw, &item) == nil && item.ID != "" {
			st.add(st.items, &storeEntry{id: item.ID, items: []json.RawMessage{raw}, used: now})
		}
	}
	st.add(st.conversations, &storeEntry{id: id, conversation: true, items: slices.Concat(input, output), used: now})
	st.expire(now)
	for st.lru.Len() > st.set.MaxEntries || st.bytes > st.set.MaxBytes {
		st.remove(st.lru.Front())
	}
}

// item returns the output item id; false when there is none (never made,
// not kept, dropped).
func (st *responseStore) item(id string) (json.RawMessage, bool) {
	e, ok := st.use(st.items, id)
	if !ok {
		return nil, false
	}
	return e.items[0], true
}

// conversation returns the items of the response id, its input then its
// output; false when there is none. The caller may append to them.
func (st *responseStore) conversation(id string) ([]json.RawMessage, bool) {
	e, ok := st.use(st.conversations, id)
	if !ok {
		return nil, false
	}
	return slices.Clip(e.items), true
}

// kept says for how long st keeps what it keeps, for the errors that name
// something no longer there.
func (st *responseStore) kept() string {
	return fmt.Sprintf("for %g minutes after their last use, not across restarts", st.set.MaxAge.Minutes())
}

// use returns the entry id of index, marked used now.
func (st *responseStore) use(index map[string]*list.Element, id string) (*storeEntry, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	now := st.set.Now()
	st.expire(now)
	el, ok := index[id]
	if !ok {
		return nil, false
	}
	e := el.Value.(*storeEntry)
	e.used = now
	st.lru.MoveToBack(el)
	return e, true
}

// add puts e into index as the entry used last. st.mu is held.
func (st *responseStore) add(index map[string]*list.Element, e *storeEntry) {
	if old, ok := index[e.id]; ok {
		st.remove(old)
	}
	for _, raw := range e.items {
		e.size += int64(len(raw))
	}
	index[e.id] = st.lru.PushBack(e)
	st.bytes += e.size
}

// remove drops the entry of el. st.mu is held.
func (st *responseStore) remove(el *list.Element) {
	e := st.lru.Remove(el).(*storeEntry)
	if e.conversation {
		delete(st.conversations, e.id)
	} else {
		delete(st.items, e.id)
	}
	st.bytes -= e.size
}

// expire drops the entries unused for MaxAge at now. st.mu is held.
func (st *responseStore) expire(now time.Time) {
	for el := st.lru.Front(); el != nil && now.Sub(el.Value.(*storeEntry).used) >= st.set.MaxAge; el = st.lru.Front() {
		st.remove(el)
	}
}

// responseStore returns s's response store.
func (s *Server) responseStore() *responseStore { return s.responses }
