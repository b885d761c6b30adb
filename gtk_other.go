//go:build !desktop || !linux

package main

// gtkOpens: there is no GTK to ask in this build (gtk_linux.go).
func gtkOpens() bool { return true }
