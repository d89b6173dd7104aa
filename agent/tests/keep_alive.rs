//! The agent sends every report over one kept-alive connection, and sends a report again on a new
//! one when the server closed the kept one just as the report went out.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tickscope_agent::client::Client;

/// What a test server saw.
#[derive(Default)]
struct Seen {
    connections: AtomicUsize,
    /// Each request's connection number and body.
    requests: Mutex<Vec<(usize, Vec<u8>)>>,
}

/// Reads one request (headers, then a `Content-Length` body); `None` when the client closed.
fn read_request(reader: &mut BufReader<TcpStream>) -> Option<Vec<u8>> {
    let mut length = 0;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            length = v.trim().parse().ok()?;
        }
        if line == "\r\n" {
            break;
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some(body)
}

/// A server that answers 200 and keeps the connection, except that on its first connection it
/// closes without an answer once it has read `answer_first` requests: as a server whose idle
/// timeout ends just as the next request arrives.
fn server(answer_first: Option<usize>) -> (String, Arc<Seen>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen = Arc::new(Seen::default());
    let shared = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            let connection = shared.connections.fetch_add(1, Ordering::SeqCst);
            let seen = shared.clone();
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream);
                let mut answered = 0;
                while let Some(body) = read_request(&mut reader) {
                    seen.requests.lock().unwrap().push((connection, body));
                    if connection == 0 && Some(answered) == answer_first {
                        return; // closed, unanswered
                    }
                    let reply = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\
                                 content-length: 19\r\n\r\n{\"status\":\"stored\"}";
                    if reader.get_mut().write_all(reply.as_bytes()).is_err() {
                        return;
                    }
                    answered += 1;
                }
            });
        }
    });
    (url, seen)
}

#[test]
fn reports_go_out_on_one_kept_alive_connection() {
    let (url, seen) = server(None);
    let client = Client::new(&url, "tks_x");
    for n in 0..3 {
        client
            .post_report(format!("{{\"n\":{n}}}").into_bytes())
            .unwrap();
    }
    let requests = seen.requests.lock().unwrap();
    assert_eq!(requests.len(), 3);
    assert_eq!(
        seen.connections.load(Ordering::SeqCst),
        1,
        "one connection for three reports"
    );
}

#[test]
fn a_report_is_sent_again_on_a_new_connection_when_the_kept_one_was_closed_under_it() {
    let (url, seen) = server(Some(1));
    let client = Client::new(&url, "tks_x");
    client.post_report(b"{\"n\":0}".to_vec()).unwrap();
    client
        .post_report(b"{\"n\":1}".to_vec())
        .expect("sent again on a new connection");
    let requests = seen.requests.lock().unwrap();
    let by_connection: Vec<(usize, &[u8])> =
        requests.iter().map(|(c, b)| (*c, b.as_slice())).collect();
    assert_eq!(
        by_connection,
        [
            (0, &b"{\"n\":0}"[..]),
            (0, &b"{\"n\":1}"[..]),
            (1, &b"{\"n\":1}"[..])
        ]
    );
}
