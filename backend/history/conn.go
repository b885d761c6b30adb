package history

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
)

// conn is the writer's own connection, used through database/sql/driver
// rather than database/sql. A CPU profile of Record through database/sql
// showed each transaction start a goroutine to watch its context, and the
// driver start one more per BEGIN and COMMIT to interrupt them (it watches
// every context that can end); BEGIN and COMMIT were also parsed anew each
// time. Here every statement is prepared once and run with a context that
// never ends, so a commit starts no goroutine. A conn is used by one
// goroutine: the writer's by the writer goroutine, the checkpoint's by
// the checkpoint (writer.go, checkpoint.go).
type conn struct {
	c     driver.Conn
	stmts map[string]driver.Stmt // prepared on first use, closed with the conn
	args  []driver.NamedValue    // reused by every statement
}

// openConn opens a connection of db's driver to dsn.
func openConn(d driver.Driver, dsn string) (*conn, error) {
	c, err := d.Open(dsn)
	if err != nil {
		return nil, err
	}
	return &conn{c: c, stmts: map[string]driver.Stmt{}}, nil
}

// stmt returns q prepared, preparing it on first use.
func (c *conn) stmt(q string) (driver.Stmt, error) {
	if st, ok := c.stmts[q]; ok {
		return st, nil
	}
	st, err := c.c.(driver.ConnPrepareContext).PrepareContext(context.Background(), q)
	if err != nil {
		return nil, fmt.Errorf("prepare: %w", err)
	}
	c.stmts[q] = st
	return st, nil
}

// exec runs q with args and reports how many rows it changed. args are
// int64, string, []byte or nil.
func (c *conn) exec(q string, args ...driver.Value) (int64, error) {
	st, err := c.stmt(q)
	if err != nil {
		return 0, err
	}
	res, err := st.(driver.StmtExecContext).ExecContext(context.Background(), c.named(args))
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// query runs q with args and returns its rows, each as many values as q
// has columns.
func (c *conn) query(q string, args ...driver.Value) ([][]driver.Value, error) {
	st, err := c.stmt(q)
	if err != nil {
		return nil, err
	}
	rows, err := st.(driver.StmtQueryContext).QueryContext(context.Background(), c.named(args))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out [][]driver.Value
	for {
		row := make([]driver.Value, len(rows.Columns()))
		if err := rows.Next(row); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, err
		}
		out = append(out, row)
	}
}

// begin starts a write transaction, holding SQLite's write lock at once.
func (c *conn) begin() error {
	_, err := c.exec("BEGIN IMMEDIATE")
	return err
}

func (c *conn) commit() error {
	_, err := c.exec("COMMIT")
	return err
}

// rollback ends the transaction c is in, if any. A failed statement may
// have ended it already (SQLite rolls back on a full disk, for one), so
// its error is of no interest.
func (c *conn) rollback() {
	c.exec("ROLLBACK")
}

// close closes the prepared statements and the connection.
func (c *conn) close() error {
	var errs []error
	for _, st := range c.stmts {
		errs = append(errs, st.Close())
	}
	errs = append(errs, c.c.Close())
	return errors.Join(errs...)
}

// named is args as the driver takes them, in a buffer the next statement
// reuses: the driver is done with them when a statement returns.
func (c *conn) named(args []driver.Value) []driver.NamedValue {
	c.args = c.args[:0]
	for i, a := range args {
		c.args = append(c.args, driver.NamedValue{Ordinal: i + 1, Value: a})
	}
	return c.args
}
