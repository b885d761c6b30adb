package upstream

import (
	"bytes"
	"io"
	"strconv"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// Tokens reads one JSON value a token at a time, for an adapter's fast
// path through the events it reads most (a chunk of text): a tokenizer
// instead of encoding/json's reflection. A fast path built on it says
// false for whatever it is not sure of and leaves that to encoding/json,
// so it must only accept what encoding/json would decode the same way;
// Skip keeps the one difference a tokenizer has, that encoding/json
// matches names without regard to case.
//
// The zero value is ready for Reset; it is not safe for concurrent use.
type Tokens struct {
	dec  jsontext.Decoder
	in   bytes.Buffer
	text []byte // scratch for a string with escapes
}

// tokensOptions: duplicate names are taken in order, the last winning, as
// encoding/json does; checking them would cost a map a value.
var tokensOptions = jsontext.AllowDuplicateNames(true)

// Reset starts reading data, which must stay unchanged while t reads it.
func (t *Tokens) Reset(data []byte) {
	t.in = *bytes.NewBuffer(data)
	t.dec.Reset(&t.in, tokensOptions)
}

// Offset is where in the data the reading stands: just after the last
// name or value read.
func (t *Tokens) Offset() int64 { return t.dec.InputOffset() }

// Kind is the kind of the next value: '{', '[', '"', '0' (a number), 't',
// 'f', 'n', or 0 at the end or on an error.
func (t *Tokens) Kind() byte { return byte(t.dec.PeekKind()) }

// End reports whether nothing but space follows the value read.
func (t *Tokens) End() bool {
	_, err := t.dec.ReadToken()
	return err == io.EOF
}

// Object reads an object, handing each name to member, which must read
// the name's value; false when member does, or the syntax is wrong. The
// name is valid until the next read.
func (t *Tokens) Object(member func(name []byte) bool) bool {
	d := &t.dec
	if d.PeekKind() != '{' {
		return false
	}
	d.ReadToken()
	for d.PeekKind() != '}' {
		v, err := d.ReadValue()
		// A name with escapes is encoding/json's to unquote and match.
		if err != nil || len(v) < 2 || bytes.IndexByte(v, '\\') >= 0 || !member(v[1:len(v)-1]) {
			return false
		}
	}
	_, err := d.ReadToken()
	return err == nil
}

// Array reads an array, calling elem for each element, which must read
// it; false when elem does, or the syntax is wrong.
func (t *Tokens) Array(elem func() bool) bool {
	d := &t.dec
	if d.PeekKind() != '[' {
		return false
	}
	d.ReadToken()
	for d.PeekKind() != ']' {
		if !elem() {
			return false
		}
	}
	_, err := d.ReadToken()
	return err == nil
}

// Null reads a null, reporting whether the next value was one.
func (t *Tokens) Null() bool {
	return t.dec.PeekKind() == 'n' && t.dec.SkipValue() == nil
}

// Str reads a string into dst; null leaves dst as it was, as
// encoding/json leaves a field (which matters for a name sent twice).
func (t *Tokens) Str(dst *string) bool {
	if t.Null() {
		return true
	}
	s, ok := t.Text()
	*dst = s
	return ok
}

// Flag reads true or false into dst; null leaves dst as it was.
func (t *Tokens) Flag(dst *bool) bool {
	if t.Null() {
		return true
	}
	b, ok := t.Bool()
	*dst = b
	return ok
}

// Integer reads an integer that fits 64 bits into dst; null leaves dst
// as it was.
func Integer[T ~int | ~int64](t *Tokens, dst *T) bool {
	if t.Null() {
		return true
	}
	n, ok := t.Int()
	*dst = T(n)
	return ok
}

// Value reads the next value whole, as it was written. It is valid until
// the next read.
func (t *Tokens) Value() ([]byte, bool) {
	v, err := t.dec.ReadValue()
	return v, err == nil
}

// Text reads a string; null is "", as encoding/json leaves a string.
func (t *Tokens) Text() (string, bool) {
	v, err := t.dec.ReadValue()
	switch {
	case err != nil:
		return "", false
	case v.Kind() == 'n':
		return "", true
	case v.Kind() != '"':
		return "", false
	case bytes.IndexByte(v, '\\') < 0:
		return string(v[1 : len(v)-1]), true
	}
	if t.text, err = jsontext.AppendUnquote(t.text[:0], v); err != nil {
		return "", false
	}
	return string(t.text), true
}

// Int reads an integer that fits 64 bits; null is 0.
func (t *Tokens) Int() (int64, bool) {
	v, err := t.dec.ReadValue()
	switch {
	case err != nil:
		return 0, false
	case v.Kind() == 'n':
		return 0, true
	case v.Kind() != '0':
		return 0, false
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	return n, err == nil
}

// Bool reads true or false; null is false.
func (t *Tokens) Bool() (bool, bool) {
	v, err := t.dec.ReadValue()
	if err != nil {
		return false, false
	}
	switch v.Kind() {
	case 't':
		return true, true
	case 'f', 'n':
		return false, true
	}
	return false, false
}

// Skip passes over the value of a name the reader does not use, unless
// encoding/json would take the name for one of known (the names the
// reader matches exactly): then it is false.
func (t *Tokens) Skip(name []byte, known []string) bool {
	for _, k := range known {
		if bytes.EqualFold(name, []byte(k)) {
			return false
		}
	}
	return t.dec.SkipValue() == nil
}

// Valid reports whether data is one JSON value, as json.Valid does (in
// half its time: a pass-through checks every event it forwards).
func Valid(data []byte) bool {
	return jsontext.Value(data).IsValid(tokensOptions, jsontext.AllowInvalidUTF8(true))
}

// Plain is the text of raw, a JSON string a decoder has checked, when it
// has no escapes and is valid UTF-8: what json.Unmarshal makes of it,
// quotes off, without its reflection. ok is false for any other raw.
func Plain(raw []byte) (s string, ok bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' || bytes.IndexByte(raw, '\\') >= 0 || !utf8.Valid(raw) {
		return "", false
	}
	return string(raw[1 : len(raw)-1]), true
}
