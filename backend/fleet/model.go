package fleet

import "strings"

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
