//! Runs the server on ephemeral loopback ports for manual poking; prints the addresses, serves for
//! the number of seconds given (default 60), then prints the totals.

fn main() {
    let seconds: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    let server = httpvs_server::start(httpvs_server::ServeConfig::loopback_ephemeral()).unwrap();
    println!("http {}", server.http_addr().unwrap());
    println!("https {}", server.https_addr().unwrap());
    println!("h3 {}", server.h3_addr().unwrap());
    std::thread::sleep(std::time::Duration::from_secs(seconds));
    println!("{}", server.shutdown(std::time::Duration::from_secs(1)));
}
