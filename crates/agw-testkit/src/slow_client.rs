//! A client that reads as slowly as the test wants: a raw connection with a 4 KiB receive buffer
//! that has sent one request and read nothing yet. The server's writes to it stall as soon as the
//! kernel's buffers are full, which is what slow-reader tests need.

use tokio::io::AsyncWriteExt;
use tokio::net::{TcpSocket, TcpStream};

/// Sends `method path` to `base` (`http://127.0.0.1:port`) with an optional JSON `body` over a
/// connection with a small receive buffer, and returns the connection unread.
pub async fn slow_client(base: &str, method: &str, path: &str, body: Option<&str>) -> TcpStream {
    let addr: std::net::SocketAddr = base.trim_start_matches("http://").parse().expect("base is http://ip:port");
    let socket = TcpSocket::new_v4().expect("a socket");
    socket.set_recv_buffer_size(4096).expect("a small receive buffer");
    let mut conn = socket.connect(addr).await.expect("connects");
    let request = match body {
        Some(body) => format!(
            "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        ),
        None => format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"),
    };
    conn.write_all(request.as_bytes()).await.expect("the request is sent");
    conn
}
