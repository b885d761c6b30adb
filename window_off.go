//go:build !desktop

package main

// hasWindow: this binary was built without the Wails window: the headless
// build (make build), which serves the same UI with `switchyard serve`.
const hasWindow = false
