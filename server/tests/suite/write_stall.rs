//! A client that asks and never reads the answers, against the real binary: once writing to it
//! makes no progress for `--write-timeout`, its connection is closed. (Apart from the other slow
//! clients' tests: it keeps the server busy for seconds, which their timings need not share.)

use crate::common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::processes::{Processes, start_server};

#[test]
fn a_client_that_never_reads_its_answers_is_cut_off_after_the_write_timeout() {
    let work = tempfile::tempdir().unwrap();
    let mut processes = Processes::default();
    let url = start_server(
        work.path().join("t.db"),
        &["--write-timeout", "2", "--header-timeout", "120"],
        &mut processes,
    );
    let mut stream = TcpStream::connect(url.trim_start_matches("http://")).unwrap();
    // Far more answers than the sockets' buffers hold, asked for at once and never read.
    let requests = "GET /login HTTP/1.1\r\nHost: x\r\n\r\n".repeat(20_000);
    let mut writer = stream.try_clone().unwrap();
    let asking = std::thread::spawn(move || {
        let _ = writer.write_all(requests.as_bytes());
    });
    std::thread::sleep(Duration::from_secs(8));
    // Read what was sent before the server gave up: it ends (the connection is closed) well
    // before the 120 s idle timeout, and holds far fewer than 20,000 answers.
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut received = Vec::new();
    let ended = stream.read_to_end(&mut received);
    let answers = received
        .windows(b"HTTP/1.1 200".len())
        .filter(|w| w == b"HTTP/1.1 200")
        .count();
    assert!(
        ended.is_ok()
            || matches!(
                ended.as_ref().unwrap_err().kind(),
                std::io::ErrorKind::ConnectionReset
            ),
        "the connection stayed open: {ended:?} after {answers} answers"
    );
    assert!(answers < 20_000, "every answer was sent: {answers}");
    asking.join().unwrap();
}
