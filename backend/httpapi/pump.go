package httpapi

import (
	"io"
	"net/http"

	"github.com/switchyard/switchyard/backend/fleet"
	"github.com/switchyard/switchyard/backend/router"
)

// encoder writes a committed answer in one dialect's stream format. Each
// method appends to dst what the caller is sent.
type encoder interface {
	// chunk appends the event of ch, made in the caller's dialect; ok is
	// false when ch has nothing of its own to send.
	chunk(dst []byte, ch *fleet.Chunk) (out []byte, ok bool)
	// raw appends the upstream's own event of ch, for a caller of the
	// upstream's dialect (every field kept); ok is false when there is
	// nothing to send.
	raw(dst []byte, ch *fleet.Chunk) (out []byte, ok bool)
	// end appends the end of a complete answer.
	end(dst []byte) []byte
	// fail appends the in-stream error of an answer that failed after its
	// first token.
	fail(dst []byte, msg string) []byte
}

// pump writes st to cw through enc until the answer ends, the upstream
// fails or the caller goes away: the one loop of every streamed answer.
// With raw the upstream's events go out as they came (the stream was put
// in pass-through). It returns nil after a complete answer, else why it
// ended; the caller closes st.
func (s *Server) pump(r *http.Request, st *router.Stream, cw *chunkWriter, enc encoder, raw bool) error {
	defer cw.release()
	// One chunk for the whole answer, cw's (chunkWriter.ch): a variable
	// per loop would cost an allocation a chunk.
	ch := &cw.ch
	for {
		err := st.RecvInto(ch)
		if err == io.EOF {
			cw.buf = enc.end(cw.hold())
			return cw.last()
		}
		if err != nil {
			if !s.callerGone(r) {
				cw.buf = enc.fail(cw.hold(), s.streamErrorText(r, err))
				cw.flush()
			}
			return err
		}
		var ok bool
		if raw {
			cw.buf, ok = enc.raw(cw.hold(), ch)
		} else {
			cw.buf, ok = enc.chunk(cw.hold(), ch)
		}
		if !ok {
			continue
		}
		if err := cw.chunk(); err != nil {
			return err // the caller went away; Close records the abort
		}
	}
}
