package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// command is a subcommand's flag set and the words of its --help.
type command struct {
	*flag.FlagSet
	name    string // "serve"
	summary string // what it does, one or more lines
	stdout  io.Writer
	stderr  io.Writer
}

// newCommand returns the flag set of subcommand name. Its flags' usage
// strings say what a flag means; a default that is not the flag's zero
// value is shown from the flag itself, one that depends on the machine
// belongs in the usage string.
func newCommand(name, summary string, stdout, stderr io.Writer) *command {
	fl := flag.NewFlagSet(name, flag.ContinueOnError)
	fl.SetOutput(io.Discard) // parse reports errors its own way
	return &command{FlagSet: fl, name: name, summary: summary, stdout: stdout, stderr: stderr}
}

// parse parses args. It returns ok false with the exit code when the
// command must end now: 0 after --help (printed to stdout), exitUsage
// after a bad flag or an argument (one line on stderr, and where to look).
func (c *command) parse(args []string) (exit int, ok bool) {
	err := c.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		c.help(c.stdout)
		return exitOK, false
	case err != nil:
		fmt.Fprintf(c.stderr, "switchyard %s: %v (see switchyard %s --help)\n", c.name, err, c.name)
		return exitUsage, false
	case c.NArg() > 0:
		fmt.Fprintf(c.stderr, "switchyard %s: unexpected argument %q (see switchyard %s --help)\n", c.name, c.Arg(0), c.name)
		return exitUsage, false
	}
	return exitOK, true
}

// help writes the command's summary and each flag with its meaning and
// default.
func (c *command) help(w io.Writer) {
	fmt.Fprintf(w, "Usage: switchyard %s [flags]\n\n%s\n", c.name, strings.TrimSpace(c.summary))
	n := 0
	c.VisitAll(func(*flag.Flag) { n++ })
	if n == 0 {
		return
	}
	fmt.Fprintln(w, "\nFlags:")
	c.VisitAll(func(f *flag.Flag) {
		value, meaning := flag.UnquoteUsage(f)
		head := "--" + f.Name
		if value != "" {
			head += " " + value
		}
		line := fmt.Sprintf("  %-22s %s", head, meaning)
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" {
			line += " (default " + f.DefValue + ")"
		}
		fmt.Fprintln(w, line)
	})
}
