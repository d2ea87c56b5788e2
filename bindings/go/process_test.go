package tq_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tq-dev/tq-go"
)

// The test binary re-executed with these variables set plays a child role
// instead of running the tests.
const (
	roleVar = "TQ_GO_TEST_ROLE"
	pathVar = "TQ_GO_TEST_PATH"
)

func TestMain(m *testing.M) {
	if role := os.Getenv(roleVar); role != "" {
		if err := runChild(role, os.Getenv(pathVar)); err != nil {
			fmt.Fprintf(os.Stderr, "child %s: %v\n", role, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// childTasks is how many tasks each process pushes in the drain test.
const childTasks = 150

// runChild plays one role, talking to the parent through stdin and stdout.
func runChild(role, path string) error {
	in := bufio.NewReader(os.Stdin)
	switch role {
	case "drain":
		// Push, say so, wait for the go-ahead, then pull and finish until
		// nothing is left, printing each finished payload.
		q, err := tq.Open(path)
		if err != nil {
			return err
		}
		defer q.Close()
		for i := range childTasks {
			if _, err := q.PushJSON(fmt.Sprintf("child %d task %d", os.Getpid(), i)); err != nil {
				return err
			}
		}
		fmt.Println("pushed")
		if _, err := in.ReadString('\n'); err != nil {
			return err
		}
		return drain(q, func(payload string) { fmt.Println(payload) })
	case "hold":
		// Pull one task and exit without finishing it.
		q, err := tq.Open(path)
		if err != nil {
			return err
		}
		task, err := q.TryPull()
		if err != nil {
			return err
		}
		fmt.Println(task.ID())
		return nil
	case "push":
		// Push one task for each line read, printing the time (Unix
		// nanoseconds) when each push returned.
		q, err := tq.Open(path)
		if err != nil {
			return err
		}
		defer q.Close()
		fmt.Println("ready")
		for {
			if _, err := in.ReadString('\n'); err == io.EOF {
				return nil
			} else if err != nil {
				return err
			}
			if _, err := q.Push([]byte(`"from another process"`)); err != nil {
				return err
			}
			fmt.Println(time.Now().UnixNano())
		}
	case "lock":
		// Hold SQLite's WAL write lock on the file (byte 120 of the -shm
		// file, as documented in SQLite's WAL format) until stdin closes.
		// fcntl locks belong to a process, so it takes another process.
		shm, err := os.OpenFile(path+"-shm", os.O_RDWR, 0)
		if err != nil {
			return err
		}
		defer shm.Close()
		lock := syscall.Flock_t{Type: syscall.F_WRLCK, Whence: io.SeekStart, Start: 120, Len: 1}
		if err := syscall.FcntlFlock(shm.Fd(), syscall.F_SETLK, &lock); err != nil {
			return err
		}
		fmt.Println("locked")
		_, err = io.Copy(io.Discard, in)
		return err
	}
	return fmt.Errorf("unknown role %q", role)
}

// drain pulls and finishes tasks until none is ready, calling done with
// each finished task's payload.
func drain(q *tq.Queue, done func(payload string)) error {
	for {
		task, err := q.TryPull()
		if errors.Is(err, tq.ErrEmpty) {
			return nil
		}
		if err != nil {
			return err
		}
		var payload string
		if err := task.Decode(&payload); err != nil {
			return err
		}
		if err := task.Finish(); err != nil {
			return err
		}
		done(payload)
	}
}

// child is a running child process of the test binary.
type child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Scanner
}

func startChild(t *testing.T, role, path string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), roleVar+"="+role, pathVar+"="+path)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		cmd.Process.Kill()
		cmd.Wait()
	})
	return &child{cmd: cmd, stdin: stdin, out: bufio.NewScanner(stdout)}
}

// line reads the child's next line of output.
func (c *child) line(t *testing.T) string {
	t.Helper()
	if !c.out.Scan() {
		t.Fatalf("child ended early: %v", c.out.Err())
	}
	return c.out.Text()
}

// wait closes the child's stdin and waits for it to exit successfully.
func (c *child) wait(t *testing.T) {
	t.Helper()
	c.stdin.Close()
	if err := c.cmd.Wait(); err != nil {
		t.Fatalf("child: %v", err)
	}
}

// Two child processes and this one push on one file, then all drain it:
// every task is finished exactly once, by one of the three.
func TestProcessesShareOneFile(t *testing.T) {
	q, path := openQueue(t)
	children := []*child{startChild(t, "drain", path), startChild(t, "drain", path)}
	var want []string
	for i := range childTasks {
		payload := fmt.Sprintf("parent task %d", i)
		if _, err := q.PushJSON(payload); err != nil {
			t.Fatal(err)
		}
		want = append(want, payload)
	}
	for _, c := range children {
		if got := c.line(t); got != "pushed" {
			t.Fatalf("child said %q", got)
		}
		for i := range childTasks {
			want = append(want, fmt.Sprintf("child %d task %d", c.cmd.Process.Pid, i))
		}
	}
	for _, c := range children {
		io.WriteString(c.stdin, "go\n")
	}

	var mu sync.Mutex
	finished := make(map[string]int)
	record := func(payload string) {
		mu.Lock()
		finished[payload]++
		mu.Unlock()
	}
	var wg sync.WaitGroup
	for _, c := range children {
		wg.Go(func() {
			for c.out.Scan() {
				record(c.out.Text())
			}
		})
	}
	if err := drain(q, record); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for _, c := range children {
		c.wait(t)
	}

	for _, payload := range want {
		if finished[payload] != 1 {
			t.Errorf("%q finished %d times, want once", payload, finished[payload])
		}
	}
	if len(finished) != len(want) {
		t.Errorf("%d distinct tasks finished, want %d", len(finished), len(want))
	}
	if n := count(t, q, tq.Pending) + count(t, q, tq.Leased); n != 0 {
		t.Fatalf("%d tasks left", n)
	}
}

// A task whose holder process died comes back at once through Recover,
// well before its 30 s lease runs out.
func TestRecoverTakesBackADeadHoldersTask(t *testing.T) {
	q, path := openQueue(t)
	id := push(t, q, `"held by a child"`)
	holder := startChild(t, "hold", path)
	if got := holder.line(t); got != fmt.Sprint(id) {
		t.Fatalf("child pulled %s, want %d", got, id)
	}
	holder.wait(t)
	if _, err := q.TryPull(); err != tq.ErrEmpty {
		t.Fatalf("the dead holder's task is ready before Recover: %v", err)
	}
	n, err := q.Recover()
	if err != nil || n != 1 {
		t.Fatalf("Recover = %d, %v; want 1", n, err)
	}
	task := tryPull(t, q)
	if task.ID() != id || task.Attempts() != 2 {
		t.Fatalf("got task %d attempt %d, want %d attempt 2", task.ID(), task.Attempts(), id)
	}
	if err := task.Finish(); err != nil {
		t.Fatal(err)
	}
}

// While another process holds the write lock, every write fails with
// ErrBusy after the busy timeout and changes nothing; reads still work.
func TestBusy(t *testing.T) {
	q, path := openQueue(t, tq.WithHistory())
	push(t, q, `"held"`)
	push(t, q, `"waiting"`)
	held := tryPull(t, q)
	impatient, err := tq.Open(path, tq.WithBusyTimeout(0), tq.WithHistory())
	if err != nil {
		t.Fatal(err)
	}
	defer impatient.Close()
	heldThere, err := impatient.TryPull()
	if err != nil {
		t.Fatal(err)
	}

	locker := startChild(t, "lock", path)
	if got := locker.line(t); got != "locked" {
		t.Fatalf("child said %q", got)
	}
	_, err = impatient.Push([]byte(`1`))
	wantErr(t, err, tq.ErrBusy, "tq: push: ")
	_, err = impatient.TryPull()
	wantErr(t, err, tq.ErrBusy, "tq: pull: ")
	_, err = impatient.Pull(t.Context())
	wantErr(t, err, tq.ErrBusy, "tq: pull: ")
	wantErr(t, heldThere.Finish(), tq.ErrBusy, "tq: finish: ")
	_, err = impatient.Recover()
	wantErr(t, err, tq.ErrBusy, "tq: recover: ")
	_, err = impatient.Purge(tq.Done, 0)
	wantErr(t, err, tq.ErrBusy, "tq: purge: ")
	_, err = impatient.PushBatch([][]byte{[]byte(`1`), []byte(`2`)})
	wantErr(t, err, tq.ErrBusy, "tq: push: ")
	_, err = impatient.PullBatch(t.Context(), 2)
	wantErr(t, err, tq.ErrBusy, "tq: pull: ")
	_, err = impatient.FinishBatch([]*tq.Task{heldThere})
	wantErr(t, err, tq.ErrBusy, "tq: finish: ")
	_, err = heldThere.FinishAndPull(t.Context())
	wantErr(t, err, tq.ErrBusy, "tq: finish: ")
	wantErr(t, heldThere.Fail("x"), tq.ErrBusy, "tq: fail: ")
	wantErr(t, heldThere.Extend(time.Minute), tq.ErrBusy, "tq: extend: ")
	_, err = impatient.RetryAllDead()
	wantErr(t, err, tq.ErrBusy, "tq: retry dead: ")
	if _, _, err := impatient.OldestReadyAge(); err != nil {
		t.Fatalf("OldestReadyAge while locked: %v", err)
	}
	if infos, err := impatient.List(tq.Leased, 0, 10); err != nil || len(infos) != 2 {
		t.Fatalf("List while locked = %d tasks, %v; want 2", len(infos), err)
	}
	if n, err := impatient.Count(tq.Leased); err != nil || n != 2 {
		t.Fatalf("Count while locked = %d, %v; want 2", n, err)
	}

	patient, err := tq.Open(path, tq.WithBusyTimeout(150*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer patient.Close()
	start := time.Now()
	_, err = patient.Push([]byte(`2`))
	wantErr(t, err, tq.ErrBusy, "tq: push: ")
	if waited := time.Since(start); waited < 140*time.Millisecond {
		t.Fatalf("gave up after %v, before the 150 ms busy timeout", waited)
	}
	locker.wait(t)

	// Nothing was done while busy, and a busy Finish may be tried again.
	if err := heldThere.Finish(); err != nil {
		t.Fatalf("Finish after the lock was released: %v", err)
	}
	if err := held.Finish(); err != nil {
		t.Fatal(err)
	}
	if p, d := count(t, q, tq.Pending), count(t, q, tq.Done); p != 0 || d != 2 {
		t.Fatalf("pending %d, done %d; want 0 and 2", p, d)
	}
}

// A push from another process wakes a waiting Pull (through the wake words
// libtq keeps in shared memory).
func TestPullWokenByAnotherProcess(t *testing.T) {
	q, path := openQueue(t)
	pusher := startChild(t, "push", path)
	if got := pusher.line(t); got != "ready" {
		t.Fatalf("child said %q", got)
	}
	var delays []time.Duration
	for range 5 {
		done := pullAsync(t.Context(), q)
		blocked(t, done)
		io.WriteString(pusher.stdin, "push\n")
		ns, err := strconv.ParseInt(pusher.line(t), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		select {
		case p := <-done:
			if p.err != nil {
				t.Fatal(p.err)
			}
			delays = append(delays, max(p.at.Sub(time.Unix(0, ns)), 0))
		case <-time.After(5 * time.Second):
			t.Fatal("a push from another process did not wake Pull")
		}
	}
	pusher.wait(t)
	latencies(t, "Pull after a push from another process", delays, promptly)
}

// A task whose every holder dies holding it ends dead once it has used
// its attempts, instead of taking down workers forever.
func TestRepeatedCrashesEndInDead(t *testing.T) {
	q, path := openQueue(t)
	id := push(t, q, `"crashes every worker"`, tq.WithTaskMaxAttempts(2))
	for range 2 {
		holder := startChild(t, "hold", path)
		if got := holder.line(t); got != fmt.Sprint(id) {
			t.Fatalf("child pulled %s, want %d", got, id)
		}
		holder.wait(t)
		if n, err := q.Recover(); err != nil || n != 1 {
			t.Fatalf("Recover = %d, %v; want 1", n, err)
		}
	}
	if _, err := q.TryPull(); err != tq.ErrEmpty {
		t.Fatalf("the task was delivered a third time: %v", err)
	}
	dead, err := q.List(tq.Dead, 0, 10)
	if err != nil || len(dead) != 1 {
		t.Fatalf("List(Dead) = %v, %v", dead, err)
	}
	reason, ok := dead[0].LastError()
	t.Logf("last error of the dead task: %q", reason)
	if dead[0].ID() != id || dead[0].Attempts() != 2 || !ok || reason == "" {
		t.Fatalf("dead task %d, %d attempts, last error %q", dead[0].ID(), dead[0].Attempts(), reason)
	}
}
