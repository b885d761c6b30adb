package report

import (
	"bufio"
	"io"
	"strconv"
	"strings"
)

// A tiny reader of the Prometheus text format, rather than
// github.com/prometheus/common/expfmt: the poller wants three gauges out of
// a vLLM /metrics page that runs to hundreds of kilobytes of histograms,
// and expfmt rejects the whole page over one line it dislikes (a family
// repeated by a multi-process exporter, an OpenMetrics "# EOF", a UTF-8
// quoted name) and needs a name-validation scheme chosen up front (its zero
// TextParser panics since v0.66). This reader skips what it does not want,
// keeps no more than one line in memory, and never fails on content.

// promSample is one sample line: name{labels} value [timestamp].
type promSample struct {
	name   string
	labels string // the text between the braces, unparsed; "" when none
	value  float64
}

// label returns the value of label key, "" when absent.
func (s promSample) label(key string) string {
	rest := s.labels
	for rest != "" {
		rest = strings.TrimLeft(rest, " ,")
		eq := strings.IndexByte(rest, '=')
		if eq < 0 {
			return ""
		}
		k := strings.TrimSpace(rest[:eq])
		v, after, ok := quoted(strings.TrimLeft(rest[eq+1:], " "))
		if !ok {
			return ""
		}
		if k == key || k == strconv.Quote(key) {
			return v
		}
		rest = after
	}
	return ""
}

// quoted reads a double-quoted label value with Prometheus escapes (\\,
// \", \n) from the start of s.
func quoted(s string) (val, rest string, ok bool) {
	if s == "" || s[0] != '"' {
		return "", "", false
	}
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		switch c := s[i]; c {
		case '"':
			return b.String(), s[i+1:], true
		case '\\':
			i++
			if i == len(s) {
				return "", "", false
			}
			if s[i] == 'n' {
				b.WriteByte('\n')
			} else {
				b.WriteByte(s[i])
			}
		default:
			b.WriteByte(c)
		}
	}
	return "", "", false
}

// maxPromLine bounds one line; longer lines are skipped.
const maxPromLine = 64 << 10

// scrapeProm calls fn for every sample whose name want accepts. Comments,
// blank lines, malformed lines and over-long lines are skipped; only a read
// error is returned.
func scrapeProm(r io.Reader, want func(name string) bool, fn func(promSample)) error {
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := readLine(br)
		if line != "" && line[0] != '#' {
			if s, ok := parsePromLine(line, want); ok {
				fn(s)
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// readLine returns the next line without its end, or "" for a line longer
// than maxPromLine (whose rest is discarded).
func readLine(br *bufio.Reader) (string, error) {
	var long bool
	var b []byte
	for {
		frag, isPrefix, err := br.ReadLine()
		if !long {
			b = append(b, frag...)
			if len(b) > maxPromLine {
				long, b = true, nil
			}
		}
		if err != nil || !isPrefix {
			if long {
				return "", err
			}
			return strings.TrimSpace(string(b)), err
		}
	}
}

// parsePromLine parses one sample line whose name want accepts.
func parsePromLine(line string, want func(string) bool) (promSample, bool) {
	var s promSample
	end := strings.IndexAny(line, "{ \t")
	if end < 0 {
		return s, false
	}
	s.name = line[:end]
	if !want(s.name) {
		return s, false
	}
	rest := line[end:]
	if rest[0] == '{' {
		closing := labelsEnd(rest)
		if closing < 0 {
			return s, false
		}
		s.labels, rest = rest[1:closing], rest[closing+1:]
	}
	fields := strings.Fields(rest)
	if len(fields) == 0 {
		return s, false
	}
	v, err := strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return s, false
	}
	s.value = v
	return s, true
}

// labelsEnd returns the index of the '}' that closes the label set s
// starts with, skipping braces inside quoted values; -1 when unclosed.
func labelsEnd(s string) int {
	inQuote := false
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			if inQuote {
				i++
			}
		case '"':
			inQuote = !inQuote
		case '}':
			if !inQuote {
				return i
			}
		}
	}
	return -1
}
