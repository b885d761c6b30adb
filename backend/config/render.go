package config

import (
	"strings"
	"unicode/utf8"
)

// Render returns c as the YAML file a user would write: every key, in the
// order of docs/CONFIG.md, each with its doc line as a comment (the keys
// of a candidate on the first one only). A list whose absence means
// something (a candidate's gpus, nil) is written as a commented-out key.
// The text depends on c alone, and for a valid c, Parse returns c again.
func Render(c Config) string {
	var p page
	writeKeys(&p, configKeys, &c, "", true)
	return p.String()
}

// page is a config file being written: lines of YAML, each with an
// optional comment; String aligns the comments.
type page struct {
	lines []line
}

type line struct{ text, comment string }

// add appends a line; an empty text and comment is a blank line.
func (p *page) add(text, comment string) { p.lines = append(p.lines, line{text, comment}) }

// commentColumn is where comments start, unless a line is longer.
const commentColumn = 32

func (p *page) String() string {
	var b strings.Builder
	for i, l := range p.lines {
		if l.text == "" && l.comment == "" && (i == 0 || i == len(p.lines)-1) {
			continue
		}
		b.WriteString(l.text)
		if l.comment != "" {
			b.WriteString(strings.Repeat(" ", max(commentColumn-utf8.RuneCountInString(l.text), 2)))
			b.WriteString("# ")
			b.WriteString(l.comment)
		}
		b.WriteByte('\n')
	}
	return b.String()
}
