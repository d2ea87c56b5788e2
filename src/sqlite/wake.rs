//! Waking the waiters of other processes sharing a file.
//!
//! Design: `docs/internals.md`, "Wake-ups across processes".

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use super::page::{SharedPage, WakeWords, QUEUE_WORDS};
use crate::wait::Bell;

/// The futex bit every watcher sleeps with: wakes them all, to stop one or
/// to widen its bitset.
const LOOK_AGAIN: u32 = 1 << 31;

/// How often waiters and watchers look for changes that rang nothing, in
/// milliseconds (tests lengthen it, to show that a wake-up came from a
/// ring).
static SAFETY_NET_MS: AtomicU64 = AtomicU64::new(1000);

/// How often, with the wake words, a waiter still looks at the file's
/// change counter.
pub(super) fn safety_net() -> Duration {
    Duration::from_millis(SAFETY_NET_MS.load(Ordering::SeqCst))
}

/// How many safety nets a watcher sleeps between two looks at the words
/// that no ring asked for.
const WATCHER_SLOWER: u32 = 10;

/// The word of the queue named `queue`: FNV-1a of the name, the same in
/// every process (unlike the standard library's seeded hashers).
pub(super) fn queue_word(queue: &str) -> usize {
    let hash = queue.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    });
    (hash % QUEUE_WORDS as u64) as usize
}

/// The futex bit of the queue named `queue`.
fn queue_bit(queue: &str) -> u32 {
    1 << queue_word(queue)
}

impl WakeWords {
    /// Tells every process's watchers that `queue` may have a task to
    /// claim; call it after the write is committed.
    pub(super) fn ring(&self, queue: &str) {
        self.queues[queue_word(queue)].fetch_add(1, Ordering::SeqCst);
        self.file.fetch_add(1, Ordering::SeqCst);
        // A watcher counts itself before it reads `file` to sleep on it:
        // either it sees the bump, or this sees it.
        if self.sleepers.load(Ordering::SeqCst) > 0 {
            wake_bits(&self.file, queue_bit(queue));
        }
    }

    /// Makes every watcher look at the words again, even those sleeping
    /// for other queues.
    fn look_again(&self) {
        self.file.fetch_add(1, Ordering::SeqCst);
        wake_bits(&self.file, LOOK_AGAIN);
    }

    fn snapshot(&self) -> [u32; QUEUE_WORDS] {
        std::array::from_fn(|word| self.queues[word].load(Ordering::SeqCst))
    }

    /// Sleeps while `file` holds `seen`, until a ring of one of the queue
    /// `bits` or [`LOOK_AGAIN`], at most `timeout`.
    fn sleep(&self, seen: u32, bits: u32, timeout: Duration) {
        self.sleepers.fetch_add(1, Ordering::SeqCst);
        if self.file.load(Ordering::SeqCst) == seen {
            wait_bits(&self.file, seen, bits | LOOK_AGAIN, timeout);
        }
        self.sleepers.fetch_sub(1, Ordering::SeqCst);
    }

    #[cfg(test)]
    pub(super) fn sleepers(&self) -> u32 {
        self.sleepers.load(Ordering::SeqCst)
    }
}

/// A shared file's watcher thread, once started.
#[derive(Default)]
pub(super) struct Watcher(Mutex<Option<Running>>);

struct Running {
    stop: Arc<AtomicBool>,
    /// The bits of the queues this process waits on (never cleared: a
    /// queue no longer waited on costs a needless wake-up at most).
    waited_on: Arc<AtomicU32>,
    thread: JoinHandle<()>,
    /// The process that started the thread, the only one where it runs.
    started_by: u32,
    page: Arc<SharedPage>,
}

impl Watcher {
    /// Makes sure that the thread that rings the bells of the file
    /// `file_id` in this process when `page`'s wake words are rung runs,
    /// and wakes for rings of `queue`; whether it runs. Call it before the
    /// waiter's first look at the queue.
    pub(super) fn start(&self, page: &Arc<SharedPage>, file_id: (u64, u64), queue: &str) -> bool {
        let mut running = self
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let bit = queue_bit(queue);
        if let Some(running) = running.as_ref() {
            if running.waited_on.fetch_or(bit, Ordering::SeqCst) & bit == 0 {
                // Asleep for other queues, it would miss this one's rings.
                page.wake_words().look_again();
            }
            return true;
        }
        let stop = Arc::new(AtomicBool::new(false));
        let waited_on = Arc::new(AtomicU32::new(bit));
        // Taken here, before the waiter's first look at the queue: a ring
        // after that look is seen as a change.
        let seen = page.wake_words().snapshot();
        let thread = std::thread::Builder::new().name("tq-wake".into()).spawn({
            let (stop, waited_on) = (Arc::clone(&stop), Arc::clone(&waited_on));
            let page = Arc::clone(page);
            move || watch(&page, file_id, seen, &waited_on, &stop)
        });
        let Ok(thread) = thread else {
            return false;
        };
        *running = Some(Running {
            stop,
            waited_on,
            thread,
            started_by: std::process::id(),
            page: Arc::clone(page),
        });
        true
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        let running = self
            .0
            .get_mut()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let Some(running) = running.take() else {
            return;
        };
        if running.started_by != std::process::id() {
            // Forked: the thread does not exist here, and its share of the
            // page stays mapped until the child exits.
            std::mem::forget(running.thread);
            return;
        }
        running.stop.store(true, Ordering::SeqCst);
        // Wakes the other processes' watchers too, for a look at words
        // that did not move.
        running.page.wake_words().look_again();
        let _ = running.thread.join();
    }
}

/// The watcher thread's loop: rings the bells of the queues whose words
/// moved since `seen`, then sleeps until the file's word moves.
fn watch(
    page: &SharedPage,
    file_id: (u64, u64),
    mut seen: [u32; QUEUE_WORDS],
    waited_on: &AtomicU32,
    stop: &AtomicBool,
) {
    let words = page.wake_words();
    while !stop.load(Ordering::SeqCst) {
        // The file's word before the queue words: a ring in between wakes
        // the next sleep at once.
        let file = words.file.load(Ordering::SeqCst);
        let now = words.snapshot();
        if now != seen {
            let moved = |queue: &str| {
                let word = queue_word(queue);
                now[word] != seen[word]
            };
            if Bell::ring_queues(file_id, moved).is_err() {
                // Fails only in a child forked mid-call, where this thread
                // does not run.
                return;
            }
            seen = now;
        }
        words.sleep(
            file,
            waited_on.load(Ordering::SeqCst),
            safety_net() * WATCHER_SLOWER,
        );
    }
}

/// Sleeps while `word` holds `expected`, until a wake of one of `bits`, at
/// most `timeout` (a shared futex: it works across processes mapping the
/// same file).
fn wait_bits(word: &AtomicU32, expected: u32, bits: u32, timeout: Duration) {
    // FUTEX_WAIT_BITSET takes a deadline on the monotonic clock.
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
    let nanos = now.tv_nsec as u64 + u64::from(timeout.subsec_nanos());
    let deadline = libc::timespec {
        tv_sec: now.tv_sec
            + timeout.as_secs() as libc::time_t
            + (nanos / 1_000_000_000) as libc::time_t,
        tv_nsec: (nanos % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: `word` is a valid, aligned u32 for the duration of the call.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT_BITSET,
            expected,
            &deadline as *const libc::timespec,
            std::ptr::null::<u32>(),
            bits,
        );
    }
}

/// Wakes every process sleeping on `word` for one of `bits`.
fn wake_bits(word: &AtomicU32, bits: u32) {
    // SAFETY: as above.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE_BITSET,
            i32::MAX,
            std::ptr::null::<libc::timespec>(),
            std::ptr::null::<u32>(),
            bits,
        );
    }
}

#[cfg(test)]
pub(super) fn set_safety_net(interval: Duration) {
    SAFETY_NET_MS.store(interval.as_millis() as u64, Ordering::SeqCst);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Cancelled, OpenOptions, PullOptions, PushOptions, Queue};
    use std::os::unix::fs::MetadataExt;
    use std::process::{Command, Stdio};
    use std::time::Instant;

    /// Set for [`waiting_child`] and [`holding_child`], run in a child
    /// process: the file to use.
    const CHILD_PATH: &str = "TQ_WAKE_TEST_PATH";

    /// How long [`waiting_child`] waits: at its end it claims anyway.
    const CHILD_WAIT: Duration = Duration::from_secs(30);

    fn open(path: &str, queue: &str) -> Queue {
        let mut options = OpenOptions::new();
        options.queue(queue).unwrap();
        Queue::open(path, &options).unwrap()
    }

    fn waiting_pull(seconds: u64) -> PullOptions {
        let mut options = PullOptions::new();
        options.wait(Duration::from_secs(seconds)).unwrap();
        options
    }

    /// In a child process: waits up to [`CHILD_WAIT`] for a task of queue
    /// "a" with a safety net of an hour, so that only a ring can wake it
    /// before the end of its wait, and prints what it got.
    #[test]
    fn waiting_child() {
        let Ok(path) = std::env::var(CHILD_PATH) else {
            return; // Not a child: nothing to do.
        };
        set_safety_net(Duration::from_secs(3600));
        let pulled = open(&path, "a")
            .pull(&waiting_pull(CHILD_WAIT.as_secs()))
            .unwrap();
        println!("pulled {:?}", pulled.as_ref().map(|task| task.payload()));
    }

    /// Runs the test `name` of this module in a child process on the file
    /// at `path`, and returns once a watcher sleeps on the file's shared
    /// page (which this process maps too), and a little more: the pause
    /// only makes it likelier that the child's wait sleeps too (a ring
    /// just before it would be seen at once, proving less).
    fn start_sleeping_child(name: &str, path: &str) -> std::process::Child {
        let page = SharedPage::open(path).expect("the shared page");
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                &format!("sqlite::wake::tests::{name}"),
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_PATH, path)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        while page.wake_words().sleepers() == 0 {
            assert!(child.try_wait().unwrap().is_none(), "the child ended early");
            std::thread::sleep(Duration::from_millis(1));
        }
        std::thread::sleep(Duration::from_millis(200));
        child
    }

    /// In a child process: claims the task of queue "a" and waits up to
    /// [`CHILD_WAIT`] for its cancellation, with a safety net of an hour,
    /// and prints what it learned.
    #[test]
    fn holding_child() {
        let Ok(path) = std::env::var(CHILD_PATH) else {
            return; // Not a child: nothing to do.
        };
        set_safety_net(Duration::from_secs(3600));
        let queue = open(&path, "a");
        let task = queue.pull(&PullOptions::new()).unwrap().expect("a task");
        let stop = queue
            .wait_for_cancellation(task.receipt(), CHILD_WAIT, None)
            .unwrap();
        println!("told {stop:?}");
    }

    #[test]
    fn a_holder_watching_in_another_process_is_told_of_a_cancellation_here() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("q.db").to_str().unwrap().to_owned();
        let queue = open(&path, "a");
        let id = queue.push("\"held\"", &PushOptions::new()).unwrap().id();
        // Its watcher sleeps once it holds the task and watches.
        let child = start_sleeping_child("holding_child", &path);
        // Pushes and finishes here do not tell it anything.
        let other = queue.push("\"other\"", &PushOptions::new()).unwrap().id();
        let pulled = queue.pull(&PullOptions::new()).unwrap().expect("the other");
        assert_eq!(pulled.id(), other);
        queue.finish(pulled.receipt()).unwrap();
        assert_eq!(queue.cancel_task(id, "stop").unwrap(), Cancelled::Requested);
        let cancelled_at = Instant::now();
        let output = child.wait_with_output().unwrap();
        assert!(
            cancelled_at.elapsed() < CHILD_WAIT / 2,
            "the child was not told of the cancellation"
        );
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success(), "{stdout}");
        assert!(stdout.contains("told Some(Cancelled)"), "{stdout}");
    }

    #[test]
    fn a_pull_waiting_in_another_process_is_woken_by_a_push_here() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("q.db").to_str().unwrap().to_owned();
        let queue = open(&path, "a");
        // Its watcher sleeps once its pull has begun to wait.
        let child = start_sleeping_child("waiting_child", &path);
        queue.push("\"woken\"", &PushOptions::new()).unwrap();
        let pushed_at = Instant::now();
        let output = child.wait_with_output().unwrap();
        // Woken by the ring, the child ends within milliseconds; only the
        // end of its wait would take it this long.
        assert!(
            pushed_at.elapsed() < CHILD_WAIT / 2,
            "the child's pull was not woken by the push"
        );
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success(), "{stdout}");
        assert!(stdout.contains(r#"pulled Some("\"woken\"")"#), "{stdout}");
    }

    #[test]
    fn a_pull_waiting_in_another_process_is_woken_by_the_applications_commit() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("q.db").to_str().unwrap().to_owned();
        let app = rusqlite::Connection::open(&path).unwrap();
        crate::outbox::install(&app).unwrap();
        let child = start_sleeping_child("waiting_child", &path);
        // Rolled back: rings nothing, leaves nothing to take.
        app.execute_batch("BEGIN IMMEDIATE; SELECT tq_push('a', '\"undone\"'); ROLLBACK;")
            .unwrap();
        app.execute_batch("BEGIN IMMEDIATE; SELECT tq_push('a', '\"committed\"'); COMMIT;")
            .unwrap();
        let committed_at = Instant::now();
        let output = child.wait_with_output().unwrap();
        assert!(
            committed_at.elapsed() < CHILD_WAIT / 2,
            "the child's pull was not woken by the commit"
        );
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success(), "{stdout}");
        assert!(
            stdout.contains(r#"pulled Some("\"committed\"")"#),
            "{stdout}"
        );
    }

    #[test]
    fn a_ring_for_one_queue_rings_only_the_bells_of_its_word() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("q.db").to_str().unwrap().to_owned();
        assert_ne!(queue_word("a"), queue_word("b"));
        let (a, b) = (Arc::new(open(&path, "a")), Arc::new(open(&path, "b")));
        // Another process's view of the page, which rings it.
        let other = SharedPage::open(&path).expect("the shared page");
        let metadata = std::fs::metadata(&path).unwrap();
        let file_id = (metadata.dev(), metadata.ino());
        let (bell_a, bell_b) = (
            Bell::for_queue(file_id, "a").unwrap(),
            Bell::for_queue(file_id, "b").unwrap(),
        );
        // Pulls waiting on both queues, with this process's watcher.
        let waiters: Vec<_> = [&a, &b]
            .into_iter()
            .map(|queue| {
                let queue = Arc::clone(queue);
                std::thread::spawn(move || queue.pull(&waiting_pull(30)).map(|task| task.is_none()))
            })
            .collect();
        while other.wake_words().sleepers() == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
        let (seen_a, seen_b) = (bell_a.rings(), bell_b.rings());
        other.wake_words().ring("b");
        let until = Instant::now() + Duration::from_secs(10);
        bell_b.sleep(seen_b, until, || false);
        assert!(bell_b.rings() > seen_b, "queue b's bell did not ring");
        // Rung in the same pass as b's, had it been rung.
        assert_eq!(bell_a.rings(), seen_a, "queue a's bell rang");
        other.wake_words().ring("a");
        bell_a.sleep(seen_a, until, || false);
        assert!(bell_a.rings() > seen_a, "queue a's bell did not ring");
        // Nothing was pushed: the waits end by hand.
        a.interrupt();
        b.interrupt();
        for waiter in waiters {
            let ended = waiter.join().unwrap();
            assert_eq!(ended.unwrap_err().kind(), crate::ErrorKind::Interrupted);
        }
    }
}
