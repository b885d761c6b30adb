package fleet

import (
	"net"
	"strings"
)

// SameModel reports whether name names model as Ollama resolves names:
// case-insensitively, with ":latest" implied when no tag is given
// ("Qwen3" is "qwen3:latest").
func SameModel(model, name string) bool {
	return ModelKey(model) == ModelKey(name)
}

// ModelKey is the form in which the names SameModel takes for one are
// equal: lower case, with Ollama's implied ":latest".
func ModelKey(s string) string { return Tagged(strings.ToLower(s)) }

// Tagged is name as Ollama lists it: with ":latest" when it has no tag
// ("llama3.2" is "llama3.2:latest"; "qwen3:8b" stays).
func Tagged(name string) string {
	// A tag follows a ':' after the last '/' (a registry's host:port
	// before it is not a tag).
	if strings.Contains(name[strings.LastIndexByte(name, '/')+1:], ":") {
		return name
	}
	return name + ":latest"
}

// ThisMachine reports whether a URL's host names this machine to whoever
// connects to it: a loopback host (LoopbackHost, "localhost." with its
// root dot too) or the unspecified address (0.0.0.0, ::), which a client
// on Linux and macOS reaches as this machine.
func ThisMachine(host string) bool {
	if LoopbackHost(strings.TrimSuffix(host, ".")) {
		return true
	}
	ip := net.ParseIP(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"))
	return ip != nil && ip.IsUnspecified()
}

// LoopbackHost reports whether host, a name or an IP with or without
// brackets but without a port, is this machine: "localhost" in any case, or
// a 127.0.0.0/8 or ::1 address.
func LoopbackHost(host string) bool {
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
