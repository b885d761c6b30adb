package realserver

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/ollama/ollama/fs/ggml"
)

// ModelSpec is the shape of a random llama-architecture model written by
// WriteModel. The zero value of a field means tiny.gguf's value.
type ModelSpec struct {
	Layers  int // block count; default 2
	Embd    int // embedding length; default 64
	FF      int // feed-forward length; default 128
	Heads   int // attention heads (and KV heads); default 4; must divide Embd
	Context int // context length; default 4096
	// ByteTokens lets the model emit byte tokens, so that answers may be
	// invalid UTF-8 (like tiny-bytes.gguf). By default they are suppressed.
	ByteTokens bool
	// KV adds or overrides metadata keys, e.g. "llama.pooling_type": uint32(1).
	// Values take the types the GGUF writer knows (uint32, float32, string,
	// bool, []int32, ...).
	KV map[string]any
	// Seed seeds the random weights.
	Seed uint64
}

// BigModel is a model that keeps llama-server (started with "-dio", its
// direct-I/O load) in the 503 "Loading model" state for about 6 s on a
// 2-core test VM (6.1-6.5 s measured), and Ollama's runner for about 6-8 s.
// It is 0.47 GB and takes under a second to write. A faster disk loads it
// faster: tests must observe the loading state, not assume its length. See
// FINDINGS.md.
func BigModel() ModelSpec {
	return ModelSpec{Layers: 4, Embd: 1024, FF: 2816, Heads: 8}
}

// EmbeddingModel is a tiny-shaped model with llama.pooling_type = mean, which
// Ollama reports with the "embedding" capability (and serves on /api/embed,
// /api/embeddings and /v1/embeddings, but not on chat).
func EmbeddingModel() ModelSpec {
	return ModelSpec{KV: map[string]any{"llama.pooling_type": uint32(1)}}
}

func (s ModelSpec) withDefaults() ModelSpec {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&s.Layers, 2)
	def(&s.Embd, 64)
	def(&s.FF, 128)
	def(&s.Heads, 4)
	def(&s.Context, 4096)
	return s
}

// WriteGGUF writes a random model of spec's shape to path, with the
// tokenizer of the bundle's tiny.gguf. It skips t without tiny.gguf and
// fails t on error.
func (b *Bundle) WriteGGUF(t testing.TB, path string, spec ModelSpec) {
	t.Helper()
	if err := WriteModel(path, b.Tiny(t), spec); err != nil {
		t.Fatalf("realserver: %v", err)
	}
}

// WriteModel writes a random F32 llama-architecture GGUF model of spec's
// shape to path, copying every tokenizer.* key from the GGUF file
// tokenizerFrom (e.g. tiny.gguf). It uses the Ollama module's GGUF writer.
func WriteModel(path, tokenizerFrom string, spec ModelSpec) error {
	spec = spec.withDefaults()
	if spec.Embd%spec.Heads != 0 {
		return fmt.Errorf("write model: embd %d not a multiple of heads %d", spec.Embd, spec.Heads)
	}
	tok, err := tokenizerKV(tokenizerFrom)
	if err != nil {
		return err
	}
	vocab := len(tok.Strings("tokenizer.ggml.tokens"))
	types := tok.Ints("tokenizer.ggml.token_type")
	if vocab == 0 || len(types) != vocab {
		return fmt.Errorf("write model: %s has no usable tokenizer", tokenizerFrom)
	}
	headDim := spec.Embd / spec.Heads
	kv := ggml.KV{
		"general.architecture":                   "llama",
		"general.name":                           "switchyard-random-llama",
		"general.file_type":                      uint32(0), // all F32
		"llama.context_length":                   uint32(spec.Context),
		"llama.embedding_length":                 uint32(spec.Embd),
		"llama.block_count":                      uint32(spec.Layers),
		"llama.feed_forward_length":              uint32(spec.FF),
		"llama.attention.head_count":             uint32(spec.Heads),
		"llama.attention.head_count_kv":          uint32(spec.Heads),
		"llama.rope.dimension_count":             uint32(headDim),
		"llama.attention.layer_norm_rms_epsilon": float32(1e-5),
		"llama.vocab_size":                       uint32(vocab),
	}
	for k, v := range tok {
		kv[k] = v
	}
	for k, v := range spec.KV {
		kv[k] = v
	}

	pool := noisePool(spec.Seed, 0.02)
	seed := 0
	mat := func(name string, cols, rows int) *ggml.Tensor {
		seed++
		return &ggml.Tensor{Name: name, Kind: 0, Shape: []uint64{uint64(cols), uint64(rows)},
			WriterTo: &tensorData{pool: pool, cols: cols, rows: rows, start: seed}}
	}
	ones := func(name string) *ggml.Tensor {
		return &ggml.Tensor{Name: name, Kind: 0, Shape: []uint64{uint64(spec.Embd)},
			WriterTo: &tensorData{cols: spec.Embd, rows: 1, fill: 1}}
	}
	embd := mat("token_embd.weight", spec.Embd, vocab)
	out := mat("output.weight", spec.Embd, vocab)
	if !spec.ByteTokens {
		// As make_tiny.py does: a constant 1 on dimension 0 of every token
		// embedding survives the layers and the final norm, and a large
		// negative output weight on it keeps byte (6) and unknown (2) tokens
		// from ever being sampled.
		embd.WriterTo.(*tensorData).col0 = func(int) (float32, bool) { return 1, true }
		out.WriterTo.(*tensorData).col0 = func(row int) (float32, bool) {
			return -20, types[row] == 6 || types[row] == 2
		}
	}
	ts := []*ggml.Tensor{embd, out, ones("output_norm.weight")}
	q := spec.Heads * headDim
	for i := range spec.Layers {
		p := fmt.Sprintf("blk.%d.", i)
		ts = append(ts,
			ones(p+"attn_norm.weight"),
			mat(p+"attn_q.weight", spec.Embd, q),
			mat(p+"attn_k.weight", spec.Embd, q),
			mat(p+"attn_v.weight", spec.Embd, q),
			mat(p+"attn_output.weight", q, spec.Embd),
			ones(p+"ffn_norm.weight"),
			mat(p+"ffn_gate.weight", spec.Embd, spec.FF),
			mat(p+"ffn_up.weight", spec.Embd, spec.FF),
			mat(p+"ffn_down.weight", spec.FF, spec.Embd),
		)
	}

	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("write model: %w", err)
	}
	if err := ggml.WriteGGUF(f, kv, ts); err != nil {
		f.Close()
		return fmt.Errorf("write model %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write model %s: %w", path, err)
	}
	return nil
}

// tokenizerKV reads the tokenizer.* keys of a GGUF file.
func tokenizerKV(path string) (ggml.KV, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	defer f.Close()
	m, err := ggml.Decode(f, -1)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: decode %s: %w", path, err)
	}
	kv := ggml.KV{}
	for k, v := range m.KV() {
		if strings.HasPrefix(k, "tokenizer.") {
			kv[k] = v
		}
	}
	return kv, nil
}

// noisePool is 4 MiB of little-endian float32 noise, uniform in
// [-scale, scale). Tensors are cut from it at shifting offsets: a big model
// is written at disk speed, and random enough for a model whose output is
// gibberish anyway.
func noisePool(seed uint64, scale float32) []byte {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	b := make([]byte, 4<<20)
	for i := 0; i < len(b); i += 4 {
		binary.LittleEndian.PutUint32(b[i:], math.Float32bits((r.Float32()*2-1)*scale))
	}
	return b
}

// tensorData writes a rows x cols F32 tensor: noise from pool, or the
// constant fill when pool is nil; col0, when set, overrides column 0 of the
// rows it says.
type tensorData struct {
	pool       []byte
	cols, rows int
	start      int
	fill       float32
	col0       func(row int) (float32, bool)
}

func (d *tensorData) WriteTo(w io.Writer) (int64, error) {
	rowBytes := d.cols * 4
	per := max(1, (1<<20)/rowBytes)
	buf := make([]byte, per*rowBytes)
	if d.pool == nil {
		for i := 0; i < len(buf); i += 4 {
			binary.LittleEndian.PutUint32(buf[i:], math.Float32bits(d.fill))
		}
	}
	var off, span int
	if d.pool != nil {
		span = len(d.pool) - len(buf)
		if span <= 0 {
			return 0, fmt.Errorf("tensor rows of %d bytes too wide", rowBytes)
		}
		off = (d.start * 104729 * 4) % span
	}
	var n int64
	for r := 0; r < d.rows; r += per {
		k := min(per, d.rows-r)
		chunk := buf[:k*rowBytes]
		if d.pool != nil {
			copy(chunk, d.pool[off:])
			off = (off + 7919*4) % span
		}
		if d.col0 != nil {
			for i := range k {
				if v, ok := d.col0(r + i); ok {
					binary.LittleEndian.PutUint32(chunk[i*rowBytes:], math.Float32bits(v))
				}
			}
		}
		m, err := w.Write(chunk)
		n += int64(m)
		if err != nil {
			return n, err
		}
	}
	return n, nil
}
