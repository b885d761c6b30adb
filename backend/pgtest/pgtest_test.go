package pgtest

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func TestStartStopFreeze(t *testing.T) {
	s := Start(t)
	url := s.NewDatabase()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ping := func(d time.Duration) error {
		c, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		conn, err := pgx.Connect(c, url)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		var one int
		return conn.QueryRow(c, "SELECT 1").Scan(&one)
	}
	if err := ping(10 * time.Second); err != nil {
		t.Fatalf("ping = %v; want nil", err)
	}
	s.Freeze()
	if err := ping(300 * time.Millisecond); err == nil {
		t.Fatal("ping of a frozen cluster = nil; want a timeout")
	}
	s.Thaw()
	if err := ping(10 * time.Second); err != nil {
		t.Fatalf("ping after Thaw = %v; want nil", err)
	}
	s.Stop()
	if err := ping(time.Second); err == nil {
		t.Fatal("ping of a stopped cluster = nil; want an error")
	}
	s.Start()
	if err := ping(10 * time.Second); err != nil {
		t.Fatalf("ping after Start = %v; want nil", err)
	}
}
