package config

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite docs/CONFIG.md from the key tables")

// docPath is docs/CONFIG.md, from this package's directory.
const docPath = "../../docs/CONFIG.md"

// TestConfigDoc fails when docs/CONFIG.md is not what the key tables say;
// go generate (go test -run TestConfigDoc -update) rewrites it.
func TestConfigDoc(t *testing.T) {
	want := configDoc()
	if *update {
		if err := os.WriteFile(docPath, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatalf("%v; run go generate ./backend/config", err)
	}
	if string(got) != want {
		t.Errorf("docs/CONFIG.md is out of date with backend/config/keys.go; run go generate ./backend/config")
	}
}

// configDoc is docs/CONFIG.md: a table per section of the key tables, and
// the defaults as Render writes them.
func configDoc() string {
	var b strings.Builder
	b.WriteString(`# Configuration

<!-- Generated from backend/config/keys.go by "go generate ./backend/config". Edit that, not this. -->

Switchyard reads one YAML file, by default ` + "`$XDG_CONFIG_HOME/switchyard/config.yaml`" + `
(` + "`~/.config/switchyard/config.yaml`" + `). Every key is optional but a candidate's
` + "`id`, `provider`, `url` and `model`" + `; a key left out takes its default. Unknown keys
are errors, and every error names the key's path and line. Saving the file applies it to
a running Switchyard; an invalid edit is rejected and the running config stays.

Durations use Go syntax: ` + "`500ms`, `30s`, `5m`, `1h30m`, `720h`" + `. Sizes are a number of
bytes, or a number with a unit:` + units() + `.

[backend/config/example.yaml](../backend/config/example.yaml) is an example with three
candidates.
`)
	for _, k := range configKeys {
		switch {
		case k.path == "listen":
			b.WriteString("\n## Top level\n\n")
			tableHead(&b)
		case k.isSection():
			fmt.Fprintf(&b, "\n## `%s`: %s\n\n", k.path, cell(k.doc))
			tableHead(&b)
			continue
		}
		tableRow(&b, k.path, k.kind, k.def, k.required, k.doc)
	}
	b.WriteString("\n## `chat.candidates` items\n\nEach item is one (server, model) pair.\n\n")
	tableHead(&b)
	for _, k := range candidateKeys {
		tableRow(&b, k.path, k.kind, k.def, k.required, k.doc)
	}
	b.WriteString("\n## The defaults\n\nA file that sets nothing means this:\n\n```yaml\n")
	b.WriteString(Render(Default()))
	b.WriteString("```\n")
	return b.String()
}

func tableHead(b *strings.Builder) {
	b.WriteString("| Key | Type | Default | Meaning |\n|---|---|---|---|\n")
}

func tableRow(b *strings.Builder, path, kind, def string, required bool, doc string) {
	switch {
	case required:
		def = "required"
	case def == "":
		def = "omitted"
	default:
		def = "`" + def + "`"
	}
	fmt.Fprintf(b, "| `%s` | %s | %s | %s |\n", path, kind, cell(def), cell(doc))
}

// cell escapes s for a Markdown table cell.
func cell(s string) string { return strings.NewReplacer("|", `\|`, "<", "&lt;").Replace(s) }

// units lists the units of sizes, smallest first: the powers of 1000,
// then the powers of 1024.
func units() string {
	var decimal, binary []string
	for _, u := range slices.Backward(sizeUnits) {
		if u.bytes > 1 && u.bytes&(u.bytes-1) == 0 {
			binary = append(binary, "`"+u.name+"`")
		} else {
			decimal = append(decimal, "`"+u.name+"`")
		}
	}
	return " " + strings.Join(decimal, ", ") + " (powers of 1000) or " + strings.Join(binary, ", ") + " (powers of 1024)"
}
