// tq's SQLite extension from Go: database/sql with mattn/go-sqlite3, whose
// ConnectHook loads libtq_sqlite.so into each connection, commits an order
// and its task in one *sql.Tx and rolls back another; tq's worker, in
// another process (this test binary re-executed), pulls exactly the
// committed task. A module of its own, so that the binding's module needs
// no SQLite driver.
package ext_test

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sqlite3 "github.com/mattn/go-sqlite3"
	"github.com/tq-dev/tq-go"
)

// extensionVar names the extension to load (make test-ext sets it).
const extensionVar = "TQ_SQLITE_EXTENSION"

// The test binary re-executed with workerVar set to a queue file plays the
// worker instead of running the tests.
const workerVar = "TQ_EXT_TEST_WORKER"

func TestMain(m *testing.M) {
	if path := os.Getenv(workerVar); path != "" {
		if err := work(path); err != nil {
			fmt.Fprintf(os.Stderr, "worker: %v\n", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// work waits for a task of the queue "emails", prints its payload,
// finishes it by its receipt in the same commit as a receipt row, then
// prints "empty" when no other task is ready.
func work(path string) error {
	db, err := sql.Open(driver, path)
	if err != nil {
		return err
	}
	defer db.Close()
	q, err := tq.Open(path, tq.WithQueue("emails"))
	if err != nil {
		return err
	}
	defer q.Close()
	fmt.Println("ready")
	// A long wait: the application's commit ends it.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	task, err := q.Pull(ctx)
	if err != nil {
		return err
	}
	fmt.Println(string(task.Payload()))
	tx, err := db.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.Exec("INSERT INTO receipts (task) VALUES (?)", task.ID()); err != nil {
		return err
	}
	if _, err := tx.Exec("SELECT tq_finish(?, ?)", task.ID(), task.Token()); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	if _, err := q.TryPull(); !errors.Is(err, tq.ErrEmpty) {
		return fmt.Errorf("a second task, or an error: %v", err)
	}
	fmt.Println("empty")
	return nil
}

// driver is mattn/go-sqlite3 with tq's extension loaded into every
// connection.
const driver = "sqlite3_tq"

func init() {
	sql.Register(driver, &sqlite3.SQLiteDriver{
		ConnectHook: func(conn *sqlite3.SQLiteConn) error {
			return conn.LoadExtension(os.Getenv(extensionVar), "sqlite3_tqsqlite_init")
		},
	})
}

// openWithExtension opens the application's database through driver, or
// skips the test when the extension cannot be loaded there.
func openWithExtension(t *testing.T, path string) *sql.DB {
	if os.Getenv(extensionVar) == "" {
		t.Skipf("%s is not set (make test-ext sets it to the extension make ext builds)", extensionVar)
	}
	if version, number, _ := sqlite3.Version(); number < 3051003 {
		t.Skipf("mattn/go-sqlite3's SQLite is %s; tq's extension needs 3.51.3 or later", version)
	}
	db, err := sql.Open(driver, path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// placeOrder inserts an order and pushes its receipt email in one
// transaction, then commits or rolls it back.
func placeOrder(t *testing.T, db *sql.DB, order int, commit bool) {
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec("INSERT INTO orders (id, total) VALUES (?, 100)", order); err != nil {
		t.Fatal(err)
	}
	var id int64
	if err := tx.QueryRow("SELECT tq_push('emails', json_object('order', ?))", order).Scan(&id); err != nil {
		t.Fatal(err)
	}
	if commit {
		err = tx.Commit()
	} else {
		err = tx.Rollback()
	}
	if err != nil {
		t.Fatal(err)
	}
}

func TestWorkerInAnotherProcessGetsExactlyTheCommittedTask(t *testing.T) {
	path := filepath.Join(t.TempDir(), "shop.db")
	db := openWithExtension(t, path)
	if _, err := db.Exec("CREATE TABLE orders (id INTEGER PRIMARY KEY, total INTEGER NOT NULL);" +
		"CREATE TABLE receipts (task INTEGER PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	placeOrder(t, db, 2, false)

	worker := exec.Command(os.Args[0])
	worker.Env = append(os.Environ(), workerVar+"="+path)
	worker.Stderr = os.Stderr
	stdout, err := worker.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := worker.Start(); err != nil {
		t.Fatal(err)
	}
	defer worker.Process.Kill()
	lines := bufio.NewScanner(stdout)
	next := func() string {
		if !lines.Scan() {
			t.Fatalf("the worker stopped: %v", lines.Err())
		}
		return lines.Text()
	}
	if line := next(); line != "ready" {
		t.Fatalf("the worker said %q, not ready", line)
	}
	// The worker is waiting: this commit wakes it.
	placeOrder(t, db, 1, true)
	if line := next(); line != `{"order":1}` {
		t.Fatalf("the worker got %s, not the committed order's task", line)
	}
	if line := next(); line != "empty" {
		t.Fatalf("the worker said %q, not empty", line)
	}
	if err := worker.Wait(); err != nil {
		t.Fatalf("the worker: %v", err)
	}

	var orders, receipts int
	if err := db.QueryRow("SELECT (SELECT group_concat(id) FROM orders), (SELECT count(*) FROM receipts)").
		Scan(&orders, &receipts); err != nil || orders != 1 || receipts != 1 {
		t.Fatalf("orders %d, receipts %d, %v; want the committed order and its receipt", orders, receipts, err)
	}
}

func TestBadPayloadFailsWithTqsMessage(t *testing.T) {
	db := openWithExtension(t, filepath.Join(t.TempDir(), "shop.db"))
	var id int64
	err := db.QueryRow("SELECT tq_push('emails', '{not json')").Scan(&id)
	if err == nil || !strings.HasPrefix(err.Error(), "tq_push: ") {
		t.Fatalf("tq_push of a bad payload: %v; want tq's message", err)
	}
}
