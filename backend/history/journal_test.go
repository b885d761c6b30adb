package history

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// Record returns once its record is in the journal, without waiting for a
// commit: here the writer's commit is held until after Record returned.
// A query then sees the record (it commits what the journal holds).
func TestJournalAcknowledgesBeforeTheCommit(t *testing.T) {
	release := make(chan struct{})
	held := make(chan struct{}, 1)
	h := hooks{beforeCommit: func(int, int) {
		select {
		case held <- struct{}{}:
			<-release
		default:
		}
	}}
	s, path := openTemp(t, Options{}, h)
	mustRecord(t, s, rec("early", t0))
	<-held // the writer is in the commit of "early"
	if ids := journalIDs(t, path); len(ids) != 1 || ids[0] != "early" {
		t.Errorf("journal holds %v; want [early]", ids)
	}
	if n := s.Commits(); n != 0 {
		t.Errorf("Commits() = %d when Record returned; want 0", n)
	}
	close(release)
	if _, err := s.Request(context.Background(), "early"); err != nil {
		t.Errorf("Request(early) = %v", err)
	}
}

// The writer commits what the journal holds in batches: commitDelay
// after the first record that waits, or at once when commitAt wait;
// straight into requests and attempts, with nothing left in the inbox.
func TestJournalCommitsInBatches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, _ := openTemp(t, Options{Now: time.Now}, hooks{moveAt: -1, moveDelay: -1})
		start := time.Now()
		for i := range 3 {
			mustRecord(t, s, rec(fmt.Sprint("r", i), t0))
		}
		synctest.Wait()
		if d := time.Since(start); d != 0 {
			t.Errorf("three Records took %v of the bubble's clock; want none", d)
		}
		if n := rows(t, s.db, "requests"); n != 0 || !s.journal.unsettled() {
			t.Errorf("requests %d at once; want 0, the records in the journal", n)
		}
		time.Sleep(commitDelay - time.Millisecond)
		synctest.Wait()
		if n := rows(t, s.db, "requests"); n != 0 {
			t.Errorf("requests %d just before commitDelay; want 0", n)
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if n, a, c := rows(t, s.db, "requests"), rows(t, s.db, "attempts"), s.Commits(); n != 3 || a != 3 || c != 1 {
			t.Errorf("commitDelay after the first record: requests %d, attempts %d in %d commits; want 3, 3 in 1", n, a, c)
		}
		if n := rows(t, s.db, "inbox"); n != 0 {
			t.Errorf("inbox %d; want 0: journaled records skip it", n)
		}
		if s.journal.unsettled() {
			t.Error("the journal still has records to commit")
		}

		for i := range commitAt {
			mustRecord(t, s, rec(fmt.Sprint("b", i), t0))
		}
		synctest.Wait()
		if n, in := rows(t, s.db, "requests"), rows(t, s.db, "inbox"); n != 3+commitAt || in != 0 {
			t.Errorf("requests %d, inbox %d once %d records wait, with no time passed; want %d, 0", n, in, commitAt, 3+commitAt)
		}
	})
}

// Open replays what a crash left in the journal: every whole frame, each
// once, even one already committed; a torn last frame is dropped and said.
func TestOpenReplaysTheJournal(t *testing.T) {
	l := &logs{}
	s, path := openTemp(t, Options{}, hooks{noJournal: true})
	mustRecord(t, s, rec("stored", t0))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	var b []byte
	for _, id := range []string{"stored", "j1", "j2"} {
		b = appendTestFrame(t, b, id)
	}
	torn := appendTestFrame(t, nil, "torn")
	b = append(b, torn[:len(torn)-3]...)
	if err := os.WriteFile(path+journalSuffix, b, 0o600); err != nil {
		t.Fatal(err)
	}

	s = openAt(t, path, Options{Logf: l.logf})
	for _, id := range []string{"stored", "j1", "j2"} {
		if _, err := s.Request(context.Background(), id); err != nil {
			t.Errorf("Request(%s) = %v", id, err)
		}
	}
	if _, err := s.Request(context.Background(), "torn"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Request(torn) = %v; want ErrNotFound", err)
	}
	if n := count(t, s, "requests"); n != 3 {
		t.Errorf("%d requests; want 3", n)
	}
	if st, err := os.Stat(path + journalSuffix); err != nil || st.Size() != 0 {
		t.Errorf("journal after Open: %v, %v; want empty", st, err)
	}
	if !strings.Contains(l.text(), "cut short by a crash") {
		t.Errorf("log = %q; want the torn record said", l.text())
	}
}

func appendTestFrame(t *testing.T, b []byte, id string) []byte {
	t.Helper()
	rec, err := encodeRecord(rec(id, t0))
	if err != nil {
		t.Fatal(err)
	}
	b = binary.LittleEndian.AppendUint32(b, uint32(len(rec)))
	b = binary.LittleEndian.AppendUint32(b, crc32.Checksum(rec, castagnoli))
	return append(b, rec...)
}

// frames stops at the first frame that is cut short or damaged.
func TestFrames(t *testing.T) {
	var b []byte
	for _, id := range []string{"a", "b", "c"} {
		b = appendTestFrame(t, b, id)
	}
	if recs, rest := frames(b); len(recs) != 3 || len(rest) != 0 {
		t.Fatalf("frames(3 whole) = %d, rest %d", len(recs), len(rest))
	}
	damaged := bytes.Clone(b)
	second := frameHeader + int(binary.LittleEndian.Uint32(b))
	damaged[second+frameHeader+2] ^= 0xff
	if recs, rest := frames(damaged); len(recs) != 1 || len(rest) != len(b)-second {
		t.Errorf("frames(second damaged) = %d, rest %d; want 1, %d", len(recs), len(rest), len(b)-second)
	}
	for cut := range len(b) {
		recs, rest := frames(b[:cut])
		if whole := len(b[:cut]) - len(rest); whole > cut || len(recs) > 3 {
			t.Fatalf("frames(b[:%d]) = %d frames, rest %d", cut, len(recs), len(rest))
		}
	}
	huge := binary.LittleEndian.AppendUint32(nil, 1<<31)
	huge = append(huge, 0, 0, 0, 0, 1)
	if recs, _ := frames(huge); len(recs) != 0 {
		t.Errorf("frames(a length past the end) = %d frames; want 0", len(recs))
	}
}

// A second Store on the file works without the journal, which the first
// holds: it commits before Record returns. Both see every record once
// the first's writer has committed.
func TestSecondStoreWorksWithoutTheJournal(t *testing.T) {
	l := &logs{}
	s, path := openTemp(t, Options{})
	other := openAt(t, path, Options{Logf: l.logf})
	if s.journal == nil || other.journal != nil {
		t.Fatalf("journals: first %v, second %v; want the first only", s.journal != nil, other.journal != nil)
	}
	if !strings.Contains(l.text(), "another Switchyard records into") {
		t.Errorf("log = %q; want it said", l.text())
	}
	mustRecord(t, other, rec("theirs", t0))
	if n := rows(t, s.db, "inbox") + rows(t, s.db, "requests"); n != 1 {
		t.Errorf("after the second Store's Record returned, %d rows hold it; want committed", n)
	}
	mustRecord(t, s, rec("mine", t0))
	for _, id := range []string{"mine", "theirs"} {
		if _, err := s.Request(context.Background(), id); err != nil {
			t.Errorf("Request(%s) = %v", id, err)
		}
	}
}

// With a journal, a repeated id is found at the commit: Record has
// returned already, so the writer logs it and keeps the first record.
func TestJournalRepeatedID(t *testing.T) {
	l := &logs{}
	s, _ := openTemp(t, Options{Logf: l.logf})
	mustRecord(t, s, rec("x", t0))
	second := rec("x", t0)
	second.ServedModel = "other"
	mustRecord(t, s, second, rec("y", t0))
	got, err := s.Request(context.Background(), "x")
	if err != nil || got.ServedModel != "llama3" {
		t.Errorf("Request(x) = %s, %v; want the first record", got.ServedModel, err)
	}
	if err := s.do(context.Background(), func() error { return nil }); err != nil { // commits what waits
		t.Fatal(err)
	}
	if !strings.Contains(l.text(), "refused request x") {
		t.Errorf("log = %q; want the repeated id said", l.text())
	}
	// The batch the tables refused went through the inbox: the others
	// in it are kept.
	if _, err := s.Request(context.Background(), "y"); err != nil {
		t.Errorf("Request(y), committed with the repeated id = %v", err)
	}
	if err := s.do(context.Background(), func() error { s.move(); return nil }); err != nil {
		t.Fatal(err)
	}
	if n := rows(t, s.db, "requests"); n != 2 {
		t.Errorf("requests %d; want 2, x once and y", n)
	}
}

// A journaled record whose id waits in the inbox, another Store's on the
// file, is refused as a repeated id: while the inbox holds records, the
// writer commits through it, where the ids waiting are known.
func TestJournalRepeatedIDWaitingInTheInbox(t *testing.T) {
	l := &logs{}
	s, path := openTemp(t, Options{Logf: l.logf}, hooks{moveAt: -1, moveDelay: -1})
	other := openAt(t, path, Options{}, hooks{moveAt: -1, moveDelay: -1, noJournal: true})
	ctx := context.Background()
	mustRecord(t, other, rec("x", t0))
	mine := rec("x", t0)
	mine.ServedModel = "mine"
	mustRecord(t, s, mine, rec("y", t0))
	if err := s.do(ctx, func() error { return nil }); err != nil { // commits what waits
		t.Fatal(err)
	}
	if !strings.Contains(l.text(), "refused request x") {
		t.Errorf("log = %q; want the repeated id said", l.text())
	}
	if err := s.do(ctx, func() error { s.move(); return nil }); err != nil {
		t.Fatal(err)
	}
	got, err := s.Request(ctx, "x")
	if err != nil || got.ServedModel != "llama3" {
		t.Errorf("Request(x) = %s, %v; want the other Store's, the first", got.ServedModel, err)
	}
	if n, in := rows(t, s.db, "requests"), rows(t, s.db, "inbox"); n != 2 || in != 0 {
		t.Errorf("requests %d, inbox %d; want 2 (x once, y), 0", n, in)
	}
	if h := s.Health(); h.Lost != 0 {
		t.Errorf("Health().Lost = %d; want 0", h.Lost)
	}
}

// When the journal can't be written, Record commits before it returns,
// and says why once in the log.
func TestJournalWriteFailsOverToCommit(t *testing.T) {
	l := &logs{}
	s, path := openTemp(t, Options{Logf: l.logf})
	s.journal.f.Close() // every write fails from now on
	mustRecord(t, s, rec("r", t0), rec("r2", t0))
	if n := rows(t, s.db, "inbox"); n != 2 {
		t.Errorf("inbox %d when Record returned; want the records committed", n)
	}
	if got := strings.Count(l.text(), "committing records before answering"); got != 1 {
		t.Errorf("log = %q; want the failure said once", l.text())
	}
	// Writable again: Records go to the journal, and the log says so.
	f, err := os.OpenFile(path+journalSuffix, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	s.journal.mu.Lock()
	s.journal.f = f
	s.journal.mu.Unlock()
	mustRecord(t, s, rec("r3", t0))
	if ids := journalIDs(t, path); len(ids) != 1 || ids[0] != "r3" {
		t.Errorf("journal holds %v; want [r3]", ids)
	}
	if !strings.Contains(l.text(), "the journal can be written again") {
		t.Errorf("log = %q; want the recovery said", l.text())
	}
}

// Once everything in it is committed, the journal is emptied when it
// has grown past its limit, and at Close.
func TestJournalIsEmptied(t *testing.T) {
	s, path := openTemp(t, Options{}, hooks{journalLimit: 2 << 10})
	size := func() int64 {
		st, err := os.Stat(path + journalSuffix)
		if err != nil {
			t.Fatal(err)
		}
		return st.Size()
	}
	grew := false
	for i := range 100 {
		mustRecord(t, s, rec(fmt.Sprintf("r%03d", i), t0))
		count(t, s, "requests") // commits what the journal holds
		if sz := size(); sz >= 2<<10 {
			t.Fatalf("journal %d bytes with every record committed; want emptied past 2 KiB", sz)
		} else if sz > 0 {
			grew = true
		}
	}
	if !grew {
		t.Error("the journal never held a record")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if sz := size(); sz != 0 {
		t.Errorf("journal %d bytes after Close; want 0", sz)
	}
}
