package history

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/switchyard/switchyard/backend/fleet"
)

// The writer moves the inbox once it holds moveAt records, and moveDelay
// after the first record that waits there.
func TestInboxMovesByCountAndDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, _ := openTemp(t, Options{Now: time.Now}, hooks{moveAt: 5, moveDelay: time.Minute, noJournal: true})
		for i := range 4 {
			mustRecord(t, s, rec(fmt.Sprint("c", i), t0))
		}
		synctest.Wait()
		if in, req := rows(t, s.db, "inbox"), rows(t, s.db, "requests"); in != 4 || req != 0 {
			t.Fatalf("after 4 records, inbox %d, requests %d; want 4, 0", in, req)
		}
		mustRecord(t, s, rec("c4", t0))
		synctest.Wait() // the writer goroutine moves
		if in, req := rows(t, s.db, "inbox"), rows(t, s.db, "requests"); in != 0 || req != 5 {
			t.Fatalf("after the 5th record, inbox %d, requests %d; want 0, 5", in, req)
		}

		mustRecord(t, s, rec("d0", t0))
		time.Sleep(time.Minute - time.Millisecond)
		synctest.Wait()
		if n := rows(t, s.db, "inbox"); n != 1 {
			t.Fatalf("just before moveDelay, inbox %d; want 1", n)
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if in, req := rows(t, s.db, "inbox"), rows(t, s.db, "requests"); in != 0 || req != 6 {
			t.Errorf("moveDelay after the first waiting record, inbox %d, requests %d; want 0, 6", in, req)
		}
	})
}

// A query reads what waits in the inbox beside the tables, and leaves it
// there: it sees every acknowledged record, this Store's and another's on
// the same file, without waiting for the writer. (Without a journal, as
// the second Store on a file works; journal_test.go has the first's.)
func TestQueriesSeeTheInbox(t *testing.T) {
	h := hooks{moveAt: -1, moveDelay: -1, noJournal: true}
	s, path := openTemp(t, Options{}, h)
	other := openAt(t, path, Options{}, h)
	ctx := context.Background()
	mustRecord(t, s, rec("mine", t0))
	mustRecord(t, other, rec("theirs", t0))
	if n := rows(t, s.db, "inbox"); n != 2 {
		t.Fatalf("inbox %d; want 2", n)
	}
	for _, id := range []string{"mine", "theirs"} {
		if _, err := s.Request(ctx, id); err != nil {
			t.Errorf("Request(%s) = %v", id, err)
		}
	}
	if n := rows(t, s.db, "inbox"); n != 2 {
		t.Errorf("inbox %d after a query; want 2, as the writer left it", n)
	}
}

// Open moves what a crash left in the inbox. A record there that can't be
// read is dropped, logged and counted lost, and holds up no other.
func TestOpenMovesWhatACrashLeft(t *testing.T) {
	s, path := openTemp(t, Options{})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for i := range 2*moveChunk + 3 {
		id := fmt.Sprintf("left-%03d", i)
		b, err := encodeRecord(rec(id, t0))
		if err != nil {
			t.Fatal(err)
		}
		if i == moveChunk+1 {
			b = b[:len(b)/2] // torn: not what Record writes, but the move must cope
		}
		if _, err := db.Exec("INSERT INTO inbox (id, rec) VALUES (?, ?)", id, b); err != nil {
			t.Fatal(err)
		}
	}
	l := &logs{}
	s = openAt(t, path, Options{Logf: l.logf})
	if in, req := rows(t, s.db, "inbox"), rows(t, s.db, "requests"); in != 0 || req != 2*moveChunk+2 {
		t.Errorf("after Open, inbox %d, requests %d; want 0, %d", in, req, 2*moveChunk+2)
	}
	bad := fmt.Sprintf("left-%03d", moveChunk+1)
	if _, err := s.Request(context.Background(), bad); !errors.Is(err, ErrNotFound) {
		t.Errorf("Request(%s) = %v; want ErrNotFound", bad, err)
	}
	if h := s.Health(); h.Lost != 1 {
		t.Errorf("Health().Lost = %d; want 1", h.Lost)
	}
	if !strings.Contains(l.text(), "lost request "+bad) {
		t.Errorf("log = %q; want the lost record said", l.text())
	}
}

// An id waiting in the inbox is refused too.
func TestRepeatedIDInTheInbox(t *testing.T) {
	s, _ := openTemp(t, Options{}, hooks{moveAt: -1, moveDelay: -1, noJournal: true})
	mustRecord(t, s, rec("x", t0))
	if err := s.Record(context.Background(), rec("x", t0)); err == nil {
		t.Error("Record(x) again succeeded; want an error")
	}
	if n := count(t, s, "requests"); n != 1 {
		t.Errorf("%d requests; want 1", n)
	}
}

func TestDecodeRecordRefusesMalformed(t *testing.T) {
	good, err := encodeRecord(rec("r", t0))
	if err != nil {
		t.Fatal(err)
	}
	if rows, err := decodeRecord(good); err != nil || len(rows) != 2 || len(rows[0]) != requestValues || len(rows[1]) != attemptValues {
		t.Fatalf("decodeRecord(good) = %d rows, %v", len(rows), err)
	}
	noRows := []byte{inboxFormat, 0}
	shortRow := append([]byte{inboxFormat, 1, 3}, good[3:]...)
	for _, tt := range []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"other format", append([]byte{inboxFormat + 1}, good[1:]...)},
		{"no rows", noRows},
		{"truncated", good[:len(good)-1]},
		{"trailing bytes", append(append([]byte{}, good...), 0)},
		{"wrong number of values", shortRow},
		{"unknown kind", append([]byte{inboxFormat, 1, requestValues}, 9)},
	} {
		if _, err := decodeRecord(tt.b); !errors.Is(err, errMalformed) {
			t.Errorf("decodeRecord(%s) = %v; want errMalformed", tt.name, err)
		}
	}
}

// A record a crash left in the inbox or the journal in format 1, from
// before attempts had their warm flag, is still read: its attempts' warm
// is NULL, which the seed does not take (it may be a queued wait).
func TestDecodeRecordOfFormat1(t *testing.T) {
	r := rec("r", t0)
	r.Attempts[0].Outcome, r.Attempts[0].TTFT = fleet.OutcomeSuccess, 40*time.Millisecond
	b, err := encodeRecord(r)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := decodeRecord(b)
	if err != nil {
		t.Fatal(err)
	}
	// The same rows as format 1 wrote them: no warm.
	e := encoder{b: []byte{1}}
	e.b = binary.AppendUvarint(e.b, uint64(len(rows)))
	for i, row := range rows {
		if i > 0 {
			row = row[:attemptValues1]
		}
		e.row(len(row))
		for _, v := range row {
			switch v := v.(type) {
			case nil:
				e.null()
			case int64:
				e.int(v)
			case string:
				e.text(v)
			default:
				t.Fatalf("value %T", v)
			}
		}
	}
	old, err := decodeRecord(e.b)
	if err != nil {
		t.Fatalf("decodeRecord(format 1) = %v", err)
	}
	if len(old[1]) != attemptValues || old[1][14] != nil || warmRow(old[1]) {
		t.Errorf("format 1 attempt = %v; want its warm NULL, no sample", old[1])
	}
	if warmRow(rows[1]) {
		t.Errorf("format 2 attempt %v, not a warm sample, read as warm", rows[1])
	}
	r.Attempts[0].Warm = true
	if b, _ = encodeRecord(r); true {
		if rows, _ = decodeRecord(b); !warmRow(rows[1]) {
			t.Errorf("format 2 attempt %v, a warm sample, not read as warm", rows[1])
		}
	}
}
