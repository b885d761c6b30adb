package fleet

import (
	"net"
	"strings"
)

// SameModel reports whether name names model as Ollama resolves names:
// case-insensitively, with ":latest" implied when no tag is given
// ("Qwen3" is "qwen3:latest").
func SameModel(model, name string) bool {
	return normalizeModel(model) == normalizeModel(name)
}

func normalizeModel(s string) string {
	s = strings.ToLower(s)
	// A tag follows a ':' after the last '/' (a registry's host:port
	// before it is not a tag).
	if strings.Contains(s[strings.LastIndexByte(s, '/')+1:], ":") {
		return s
	}
	return s + ":latest"
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
