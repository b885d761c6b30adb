package fleet

import "encoding/json"

// MaxErrorText bounds an error text kept in a record or an event.
const MaxErrorText = 1024

// Clip cuts an error text to MaxErrorText bytes on a rune boundary, marking
// the cut with "…".
func Clip(s string) string { return ClipTo(s, MaxErrorText) }

// ClipTo cuts s to at most n bytes on a rune boundary, marking the cut with
// "…".
func ClipTo(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}

// IsSet reports whether a JSON field was sent with a value: present and not
// null.
func IsSet(raw json.RawMessage) bool { return len(raw) > 0 && string(raw) != "null" }
