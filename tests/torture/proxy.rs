//! A TCP proxy between tq and the PostgreSQL server, for the network
//! faults scenario: it accepts on 127.0.0.1, connects each client to the
//! server and copies bytes both ways, one thread per direction, until the
//! test cuts connections or stalls them.
//!
//! A cut shuts both sockets of a connection down: the client reads the end
//! of its stream at once, as after a reset, and the server sees its
//! session end. A stall stops the copying of every connection, new ones
//! included, until it is lifted: calls wait with their bytes in flight, as
//! on a network that stops delivering without closing anything.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread;
use std::time::Duration;

use super::harness::Rng;

/// How often a stalled copier looks whether the stall was lifted.
const STALL_POLL: Duration = Duration::from_millis(2);

pub struct Proxy {
    /// Where clients connect.
    pub addr: SocketAddr,
    shared: Arc<Shared>,
}

struct Shared {
    links: Mutex<Vec<Link>>,
    stalled: AtomicBool,
    stop: AtomicBool,
    next_id: AtomicU64,
}

/// One client's connection: its socket to the client and to the server.
struct Link {
    id: u64,
    client: TcpStream,
    server: TcpStream,
}

impl Link {
    fn cut(&self) {
        let _ = self.client.shutdown(Shutdown::Both);
        let _ = self.server.shutdown(Shutdown::Both);
    }
}

impl Proxy {
    /// Listens on a free port of 127.0.0.1 and forwards to `upstream`.
    pub fn start(upstream: SocketAddr) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the proxy");
        let addr = listener.local_addr().expect("the proxy's address");
        let shared = Arc::new(Shared {
            links: Mutex::new(Vec::new()),
            stalled: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            next_id: AtomicU64::new(0),
        });
        let accepting = Arc::clone(&shared);
        thread::spawn(move || {
            for client in listener.incoming() {
                if accepting.stop.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(client) = client else { continue };
                // The server may be restarting: the client then sees its
                // connection closed, as it would without a proxy.
                let Ok(server) = TcpStream::connect(upstream) else {
                    continue;
                };
                accepting.add(client, server);
            }
        });
        Proxy { addr, shared }
    }

    /// Cuts every open connection; returns how many.
    pub fn cut_all(&self) -> usize {
        let links = std::mem::take(&mut *self.shared.links());
        for link in &links {
            link.cut();
        }
        links.len()
    }

    /// Cuts up to `count` open connections chosen at random; returns how
    /// many.
    pub fn cut_some(&self, rng: &mut Rng, count: usize) -> usize {
        let mut links = self.shared.links();
        let mut cut = 0;
        while cut < count && !links.is_empty() {
            let index = rng.range(0, links.len() as u64 - 1) as usize;
            links.swap_remove(index).cut();
            cut += 1;
        }
        cut
    }

    /// Stops (`true`) or resumes (`false`) the copying of every connection.
    pub fn stall(&self, stalled: bool) {
        self.shared.stalled.store(stalled, Ordering::SeqCst);
    }
}

impl Drop for Proxy {
    /// Stops accepting (a last connection wakes the accepting thread) and
    /// cuts what is left.
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        self.stall(false);
        let _ = TcpStream::connect(self.addr);
        self.cut_all();
    }
}

impl Shared {
    fn links(&self) -> MutexGuard<'_, Vec<Link>> {
        // Entries are pushed and removed whole: a panic cannot leave the
        // list half-changed.
        self.links
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Starts copying between `client` and `server` both ways.
    fn add(self: &Arc<Self>, client: TcpStream, server: TcpStream) {
        let _ = client.set_nodelay(true);
        let _ = server.set_nodelay(true);
        let id = self.next_id.fetch_add(1, Ordering::SeqCst);
        let (Ok(client2), Ok(server2)) = (client.try_clone(), server.try_clone()) else {
            return;
        };
        let (Ok(client3), Ok(server3)) = (client.try_clone(), server.try_clone()) else {
            return;
        };
        self.links().push(Link { id, client, server });
        for (from, to) in [(client2, server2), (server3, client3)] {
            let shared = Arc::clone(self);
            thread::spawn(move || shared.copy(id, from, to));
        }
    }

    /// Copies `from` to `to` until either side ends or the link is cut;
    /// then ends the whole link, so that both peers see it closed.
    fn copy(&self, id: u64, mut from: TcpStream, mut to: TcpStream) {
        let mut buffer = [0u8; 16 * 1024];
        loop {
            let n = match from.read(&mut buffer) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            while self.stalled.load(Ordering::SeqCst) {
                thread::sleep(STALL_POLL);
            }
            if to.write_all(&buffer[..n]).is_err() {
                break;
            }
        }
        let _ = from.shutdown(Shutdown::Both);
        let _ = to.shutdown(Shutdown::Both);
        self.links().retain(|link| link.id != id);
    }
}
