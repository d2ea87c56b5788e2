//! The failures of a networked database, on PostgreSQL.

use tq::{OpenOptions, Queue};

/// While PostgreSQL starts up, shuts down or recovers from a crash, it
/// answers a new connection with FATAL 57P03 ("the database system is
/// starting up"): a server out of reach for a moment, to be tried again,
/// not a refusal of the URL. A fake server that answers only that stands
/// for it here.
#[test]
fn a_server_starting_up_or_shutting_down_is_out_of_reach_not_a_bad_url() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("an address").port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let _ = answer_starting_up(&mut stream);
        }
    });
    let url = format!("postgres://tq@127.0.0.1:{port}/tq");
    let Err(err) = Queue::open(&url, &OpenOptions::new()) else {
        panic!("opened a queue on a server that is starting up");
    };
    assert_eq!(err.kind(), tq::ErrorKind::Io, "{err}");
    assert!(err.message().contains("starting up"), "{err}");
}

/// Reads a client's startup message (after refusing TLS, if it asks) and
/// answers that the server is starting up.
fn answer_starting_up(stream: &mut std::net::TcpStream) -> std::io::Result<()> {
    use std::io::{Read, Write};
    const SSL_REQUEST: u32 = 80_877_103;
    loop {
        let mut header = [0u8; 8];
        stream.read_exact(&mut header)?;
        let length = u32::from_be_bytes(header[..4].try_into().unwrap()) as usize;
        let code = u32::from_be_bytes(header[4..].try_into().unwrap());
        if code == SSL_REQUEST {
            stream.write_all(b"N")?;
            continue;
        }
        let mut rest = vec![0u8; length.saturating_sub(8)];
        stream.read_exact(&mut rest)?;
        break;
    }
    let mut fields = Vec::new();
    for (tag, value) in [
        (b'S', "FATAL"),
        (b'V', "FATAL"),
        (b'C', "57P03"),
        (b'M', "the database system is starting up"),
    ] {
        fields.push(tag);
        fields.extend_from_slice(value.as_bytes());
        fields.push(0);
    }
    fields.push(0);
    let mut message = vec![b'E'];
    message.extend_from_slice(&(fields.len() as u32 + 4).to_be_bytes());
    message.extend_from_slice(&fields);
    stream.write_all(&message)
}
