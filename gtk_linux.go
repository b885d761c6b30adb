//go:build desktop && linux

package main

/*
#cgo linux pkg-config: gtk+-3.0
#include <gtk/gtk.h>
*/
import "C"

// gtkOpens reports whether GTK can open its display, as gtk_init_check
// says: a display that is there but refuses this program (no X cookie,
// after ssh or sudo) made the gtk_init Wails calls panic with a goroutine
// trace. GTK takes the same init again when Wails starts.
func gtkOpens() bool { return C.gtk_init_check(nil, nil) != 0 }
