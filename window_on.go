//go:build desktop

package main

// hasWindow: this binary was built with the Wails window (-tags desktop).
const hasWindow = true
