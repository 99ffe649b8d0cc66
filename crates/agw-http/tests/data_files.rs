//! `GET /api/ap/data/{file}` against files that change under it (issue 14): a symlink swapped in
//! between a check and an open is never served, a FIFO does not hang the request, and a huge
//! range is streamed with bounded memory.

mod common;

use std::time::{Duration, Instant};

use common::{Gateway, oneshot_agent, rss_bytes};
use futures::StreamExt;

/// Attack: a loop swaps `race.txt` between a regular file and a symlink to a secret outside the
/// data directory while requests for it run. Before the fix the handler checked the path with
/// `symlink_metadata` and then opened the path, so a swap in between served the secret.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_symlink_swapped_in_during_a_request_is_never_served() {
    let gw = Gateway::start(&[oneshot_agent("a", false, 1000)], &[]).await;
    let data = gw.agents_dir.join("data");
    std::fs::create_dir_all(&data).unwrap();
    let secret = gw.agents_dir.join("secret.txt");
    std::fs::write(&secret, b"TOP SECRET").unwrap();
    let (regular, link, target) = (data.join("plain.tmp"), data.join("link.tmp"), data.join("race.txt"));
    std::fs::write(&regular, b"public").unwrap();

    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let swapper = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut swaps = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                // rename() is atomic: the name is always either a regular file or a symlink.
                let _ = std::fs::write(&regular, b"public");
                let _ = std::fs::rename(&regular, &target);
                let _ = std::os::unix::fs::symlink(&secret, &link);
                let _ = std::fs::rename(&link, &target);
                swaps += 1;
            }
            swaps
        })
    };
    let started = Instant::now();
    let (mut served, mut refused) = (0, 0);
    while started.elapsed() < Duration::from_secs(3) {
        let resp = gw.client.get(format!("{}/api/ap/data/race.txt", gw.base)).send().await.unwrap();
        let status = resp.status().as_u16();
        let body = resp.bytes().await.unwrap();
        assert_ne!(body.as_ref(), b"TOP SECRET", "the secret behind a swapped-in symlink was served");
        match status {
            200 => served += 1,
            404 => refused += 1,
            other => panic!("unexpected status {other}"),
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let swaps = swapper.join().unwrap();
    assert!(served > 0 && refused > 0, "both states were hit: {served} served, {refused} refused, {swaps} swaps");
}

/// A FIFO in the data directory would block a plain open forever.
#[tokio::test]
async fn a_fifo_is_not_served_and_does_not_hang() {
    let gw = Gateway::start(&[oneshot_agent("a", false, 1000)], &[]).await;
    let data = gw.agents_dir.join("data");
    std::fs::create_dir_all(&data).unwrap();
    let fifo = data.join("pipe.txt");
    let c_path = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path; mkfifo has no other preconditions.
    #[allow(unsafe_code)]
    let made = unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) };
    assert_eq!(made, 0);
    let resp =
        tokio::time::timeout(Duration::from_secs(5), gw.client.get(format!("{}/api/ap/data/pipe.txt", gw.base)).send())
            .await
            .expect("answered without hanging")
            .unwrap();
    assert_eq!(resp.status(), 404);
}

/// A 1 GiB file (sparse) requested with a Range over all of it streams through with the server's
/// memory staying flat: before the fix the whole file was read into memory first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_one_gib_range_streams_with_bounded_memory() {
    const GIB: u64 = 1024 * 1024 * 1024;
    let gw = Gateway::start(&[oneshot_agent("a", false, 1000)], &[]).await;
    let data = gw.agents_dir.join("data");
    std::fs::create_dir_all(&data).unwrap();
    let file = std::fs::File::create(data.join("big.bin")).unwrap();
    file.set_len(GIB).unwrap();
    drop(file);

    let before = rss_bytes();
    let resp = gw
        .client
        .get(format!("{}/api/ap/data/big.bin", gw.base))
        .header("range", format!("bytes=0-{}", GIB - 1))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 206);
    assert_eq!(resp.headers()["content-length"], GIB.to_string().as_str());
    let mut body = resp.bytes_stream();
    let (mut received, mut peak) = (0u64, before);
    while let Some(chunk) = body.next().await {
        received += chunk.unwrap().len() as u64;
        peak = peak.max(rss_bytes());
    }
    assert_eq!(received, GIB);
    let growth = peak.saturating_sub(before);
    assert!(growth < 64 * 1024 * 1024, "RSS grew by {} MiB while streaming 1 GiB", growth / (1024 * 1024));
    eprintln!("1 GiB range: RSS growth {} KiB", growth / 1024);
}
