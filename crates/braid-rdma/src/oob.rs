//! Out-of-band setup over TCP, as perftest does: each side sends the endpoints its applications
//! published on their board ([`braid_verbs::rendezvous`]: QPN, address, rkey, the host's IPv4
//! address standing for its GID) and adds the peer's to its own, then both connect. The same
//! socket later carries a "done" line, so the server knows when the client has finished.

use braid_verbs::rendezvous::{Endpoint, Rendezvous, Side};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

/// A board that remembers what was published locally, to send it to the peer.
#[derive(Debug, Default)]
pub struct TcpBoard {
    map: BTreeMap<(u64, Side), Endpoint>,
    local: Vec<(u64, Side)>,
}

impl Rendezvous for TcpBoard {
    fn publish(&mut self, conn: u64, side: Side, ep: Endpoint) {
        self.map.insert((conn, side), ep);
        self.local.push((conn, side));
    }
    fn lookup(&self, conn: u64, side: Side) -> Option<Endpoint> {
        self.map.get(&(conn, side)).copied()
    }
}

fn side_str(s: Side) -> &'static str {
    match s {
        Side::Client => "client",
        Side::Server => "server",
    }
}

/// One endpoint as a line: `ep CONN SIDE HOST QPN ADDR RKEY`.
pub fn encode(conn: u64, side: Side, e: &Endpoint) -> String {
    format!(
        "ep {conn} {} {} {} {} {}\n",
        side_str(side),
        e.host,
        e.qpn,
        e.addr,
        e.rkey
    )
}

/// Parses a line written by [`encode`].
pub fn decode(line: &str) -> Result<(u64, Side, Endpoint), String> {
    let f: Vec<&str> = line.split_whitespace().collect();
    let bad = || format!("malformed endpoint line {line:?}");
    if f.len() != 7 || f[0] != "ep" {
        return Err(bad());
    }
    let n = |s: &str| s.parse::<u64>().map_err(|_| bad());
    let side = match f[2] {
        "client" => Side::Client,
        "server" => Side::Server,
        _ => return Err(bad()),
    };
    Ok((
        n(f[1])?,
        side,
        Endpoint {
            host: n(f[3])? as u32,
            qpn: n(f[4])? as u32,
            addr: n(f[5])?,
            rkey: n(f[6])? as u32,
        },
    ))
}

/// The TCP connection between the two sides.
pub struct Oob {
    stream: TcpStream,
    reader: BufReader<TcpStream>,
}

impl Oob {
    /// Server side: waits up to `wait` for the client on `port` (all addresses).
    pub fn accept(port: u16, wait: Duration) -> std::io::Result<Oob> {
        let l = TcpListener::bind(("0.0.0.0", port))?;
        l.set_nonblocking(true)?;
        let end = Instant::now() + wait;
        loop {
            match l.accept() {
                Ok((s, _)) => {
                    s.set_nonblocking(false)?;
                    return Oob::from(s);
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock && Instant::now() < end => {
                    std::thread::sleep(Duration::from_millis(20))
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Client side: connects to `addr:port`, retrying for up to `wait` (the server may start
    /// later).
    pub fn connect(addr: &str, port: u16, wait: Duration) -> std::io::Result<Oob> {
        let end = Instant::now() + wait;
        loop {
            match TcpStream::connect((addr, port)) {
                Ok(s) => return Oob::from(s),
                Err(_) if Instant::now() < end => std::thread::sleep(Duration::from_millis(50)),
                Err(e) => return Err(e),
            }
        }
    }

    fn from(s: TcpStream) -> std::io::Result<Oob> {
        s.set_nodelay(true)?;
        Ok(Oob {
            reader: BufReader::new(s.try_clone()?),
            stream: s,
        })
    }

    fn line(&mut self) -> std::io::Result<String> {
        let mut l = String::new();
        if self.reader.read_line(&mut l)? == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "the peer closed the connection",
            ));
        }
        Ok(l.trim_end().to_string())
    }

    /// Sends `extra` (one line of settings the peer checks) and the board's local endpoints,
    /// receives the peer's; returns the peer's settings line.
    pub fn exchange(&mut self, board: &mut TcpBoard, extra: &str) -> std::io::Result<String> {
        let mut msg = format!("settings {extra}\n");
        for &(c, s) in &board.local {
            msg.push_str(&encode(c, s, &board.map[&(c, s)]));
        }
        msg.push_str("end\n");
        self.stream.write_all(msg.as_bytes())?;
        let first = self.line()?;
        let theirs = first
            .strip_prefix("settings ")
            .unwrap_or_default()
            .to_string();
        loop {
            let l = self.line()?;
            if l == "end" {
                return Ok(theirs);
            }
            let (c, s, e) =
                decode(&l).map_err(|m| std::io::Error::new(std::io::ErrorKind::InvalidData, m))?;
            board.map.insert((c, s), e);
        }
    }

    /// Sends one line.
    pub fn send(&mut self, line: &str) -> std::io::Result<()> {
        self.stream.write_all(format!("{line}\n").as_bytes())
    }

    /// Receives one line (blocking).
    pub fn recv(&mut self) -> std::io::Result<String> {
        self.line()
    }

    /// Whether a line is waiting (non-blocking peek).
    pub fn ready(&mut self) -> bool {
        if !self.reader.buffer().is_empty() {
            return true;
        }
        let _ = self.stream.set_nonblocking(true);
        let mut b = [0u8; 1];
        let r = self.stream.peek(&mut b);
        let _ = self.stream.set_nonblocking(false);
        matches!(r, Ok(n) if n > 0) || matches!(r, Ok(0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_round_trip_and_bad_lines_are_refused() {
        let e = Endpoint {
            host: 0x0a00_0001,
            qpn: 17,
            addr: 0x1000_0000,
            rkey: 0xabc,
        };
        let l = encode(3, Side::Server, &e);
        assert_eq!(decode(&l).unwrap(), (3, Side::Server, e));
        assert!(decode("ep 3 nobody 1 2 3 4").is_err());
        assert!(decode("ep 3 server 1 2 3").is_err());
    }

    #[test]
    fn two_sides_exchange_over_tcp() {
        let port = 18515 + (std::process::id() % 1000) as u16;
        let server = std::thread::spawn(move || {
            let mut o = Oob::accept(port, Duration::from_secs(10)).unwrap();
            let mut b = TcpBoard::default();
            let e = Endpoint {
                host: 1,
                qpn: 2,
                addr: 3,
                rkey: 4,
            };
            b.publish(0, Side::Server, e);
            let s = o.exchange(&mut b, "write_bw 64").unwrap();
            assert_eq!(s, "write_bw 65536");
            assert_eq!(o.recv().unwrap(), "done");
            b.lookup(0, Side::Client).unwrap()
        });
        let mut o = Oob::connect("127.0.0.1", port, Duration::from_secs(10)).unwrap();
        let mut b = TcpBoard::default();
        let e = Endpoint {
            host: 5,
            qpn: 6,
            addr: 7,
            rkey: 8,
        };
        b.publish(0, Side::Client, e);
        assert_eq!(o.exchange(&mut b, "write_bw 65536").unwrap(), "write_bw 64");
        assert_eq!(b.lookup(0, Side::Server).unwrap().qpn, 2);
        o.send("done").unwrap();
        assert_eq!(server.join().unwrap(), e);
    }
}
