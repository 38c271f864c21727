//! Out-of-band setup over TCP, as perftest does: each side sends the endpoints its applications
//! published on their board ([`braid_verbs::rendezvous`]: QPN, address, rkey, the host's IPv4
//! address standing for its GID, and the QP's initial PSN from [`crate::psn`]) and adds the
//! peer's to its own, then both connect. The same
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

/// One endpoint as a line: `ep CONN SIDE HOST QPN ADDR RKEY PSN`, PSN the QP's initial PSN
/// ([`crate::psn::lookup`]) or `-` when this process does not know it.
pub fn encode(conn: u64, side: Side, e: &Endpoint) -> String {
    let psn = crate::psn::lookup(e.host, e.qpn).map_or("-".to_string(), |p| p.to_string());
    format!(
        "ep {conn} {} {} {} {} {} {psn}\n",
        side_str(side),
        e.host,
        e.qpn,
        e.addr,
        e.rkey
    )
}

/// Parses a line written by [`encode`], and records the endpoint's initial PSN, when it
/// carries one, for the QP that connects to it ([`crate::psn::record`]).
pub fn decode(line: &str) -> Result<(u64, Side, Endpoint), String> {
    let f: Vec<&str> = line.split_whitespace().collect();
    let bad = || format!("malformed endpoint line {line:?}");
    if f.len() != 8 || f[0] != "ep" {
        return Err(bad());
    }
    let psn = match f[7] {
        "-" => None,
        p => Some(
            p.parse::<u32>()
                .ok()
                .filter(|&p| p <= crate::psn::PSN_MASK)
                .ok_or_else(bad)?,
        ),
    };
    let n = |s: &str| s.parse::<u64>().map_err(|_| bad());
    let side = match f[2] {
        "client" => Side::Client,
        "server" => Side::Server,
        _ => return Err(bad()),
    };
    let e = Endpoint {
        host: n(f[3])? as u32,
        qpn: n(f[4])? as u32,
        addr: n(f[5])?,
        rkey: n(f[6])? as u32,
    };
    let conn = n(f[1])?;
    if let Some(p) = psn {
        crate::psn::record(e.host, e.qpn, p);
    }
    Ok((conn, side, e))
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

/// A live out-of-band board shared by several real hosts over TCP, for mechanisms whose pieces
/// meet on the run's board while they run (the Justitia pacer's links, the DRUM agent, the
/// `partition` layer's extra QPs): what is published on one host appears on every other host's
/// board shortly after. One host serves ([`NetBoard::serve`]: it keeps accepting hosts and
/// relays every entry to all the others), the others join it ([`NetBoard::join`]); a host that
/// joins late first gets every entry known so far. A reader thread per connection puts arriving
/// entries into the shared map, so [`Rendezvous::lookup`] never blocks: mechanisms poll the board
/// (with their own back-off) exactly as they do on the simulator's in-process board.
///
/// [`NetBoard::barrier`] orders the board with another channel: once it returns, every entry
/// the peers published before their own `barrier` call is on this board.
pub struct NetBoard {
    shared: std::sync::Arc<NetShared>,
}

#[derive(Default)]
struct NetShared {
    map: std::sync::Mutex<BTreeMap<(u64, Side), Endpoint>>,
    /// Writers to every connected host.
    peers: std::sync::Mutex<Vec<TcpStream>>,
    /// Barrier marks received, by number: how many hosts sent each.
    marks: std::sync::Mutex<BTreeMap<u64, usize>>,
    /// The next barrier's number (the same sequence on every host).
    next_mark: std::sync::Mutex<u64>,
    /// The hub relays what it receives to the other hosts.
    hub: bool,
}

impl NetShared {
    fn send_all(&self, line: &str, except: Option<std::net::SocketAddr>) {
        let mut peers = self.peers.lock().expect("board lock");
        peers.retain_mut(|s| {
            if except.is_some() && s.peer_addr().ok() == except {
                return true;
            }
            s.write_all(line.as_bytes()).is_ok()
        });
    }

    /// Reads a host's lines until it closes: entries into the map (relayed by the hub), marks
    /// counted.
    fn reader(self: std::sync::Arc<Self>, s: TcpStream) {
        let from = s.peer_addr().ok();
        let mut r = BufReader::new(s);
        let mut l = String::new();
        loop {
            l.clear();
            match r.read_line(&mut l) {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            if let Some(n) = l.trim_end().strip_prefix("mark ") {
                if let Ok(n) = n.parse::<u64>() {
                    *self.marks.lock().expect("board lock").entry(n).or_default() += 1;
                }
                continue;
            }
            let Ok((c, side, e)) = decode(&l) else {
                continue; // a line from a newer or broken peer: ignored, not fatal
            };
            self.map.lock().expect("board lock").insert((c, side), e);
            if self.hub {
                self.send_all(&l, from);
            }
        }
    }
}

impl NetBoard {
    /// Serves the board on `port` (all addresses); hosts may join at any time.
    pub fn serve(port: u16) -> std::io::Result<NetBoard> {
        let l = TcpListener::bind(("0.0.0.0", port))?;
        let shared = std::sync::Arc::new(NetShared {
            hub: true,
            ..Default::default()
        });
        let sh = shared.clone();
        std::thread::spawn(move || {
            for s in l.incoming().flatten() {
                let _ = s.set_nodelay(true);
                let Ok(mut w) = s.try_clone() else { continue };
                // Everything known so far, then live updates.
                let mut all = String::new();
                for (&(c, side), e) in sh.map.lock().expect("board lock").iter() {
                    all.push_str(&encode(c, side, e));
                }
                if w.write_all(all.as_bytes()).is_err() {
                    continue;
                }
                sh.peers.lock().expect("board lock").push(w);
                let sh2 = sh.clone();
                std::thread::spawn(move || sh2.reader(s));
            }
        });
        Ok(NetBoard { shared })
    }

    /// Joins the board served at `addr:port`, retrying for up to `wait`.
    pub fn join(addr: &str, port: u16, wait: Duration) -> std::io::Result<NetBoard> {
        let end = Instant::now() + wait;
        let s = loop {
            match TcpStream::connect((addr, port)) {
                Ok(s) => break s,
                Err(_) if Instant::now() < end => std::thread::sleep(Duration::from_millis(50)),
                Err(e) => return Err(e),
            }
        };
        s.set_nodelay(true)?;
        let shared = std::sync::Arc::new(NetShared::default());
        shared
            .peers
            .lock()
            .expect("board lock")
            .push(s.try_clone()?);
        let sh = shared.clone();
        std::thread::spawn(move || sh.reader(s));
        Ok(NetBoard { shared })
    }

    /// Waits until `hosts` other hosts have reached the same barrier (or `wait` passed: false).
    /// Entries published before a barrier travel ahead of its mark on the same connection, so
    /// afterwards they are on this board.
    pub fn barrier(&self, hosts: usize, wait: Duration) -> bool {
        let n = {
            let mut m = self.shared.next_mark.lock().expect("board lock");
            *m += 1;
            *m
        };
        // The hub's own mark goes to everyone; a joined host's reaches the hub, which counts it
        // (marks are not relayed: a joined host waits for the hub's, sent once the hub has
        // everyone's, so the hub's mark also covers every other host's entries).
        if !self.shared.hub {
            self.shared.send_all(&format!("mark {n}\n"), None);
        }
        let end = Instant::now() + wait;
        let want = if self.shared.hub { hosts } else { 1 };
        loop {
            let got = self
                .shared
                .marks
                .lock()
                .expect("board lock")
                .get(&n)
                .copied()
                .unwrap_or(0);
            if got >= want {
                if self.shared.hub {
                    self.shared.send_all(&format!("mark {n}\n"), None);
                }
                return true;
            }
            if Instant::now() >= end {
                return false;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// A handle that can run [`NetBoard::barrier`] after the board itself went into a
    /// host's context.
    pub fn barrier_handle(&self) -> NetBoard {
        NetBoard {
            shared: self.shared.clone(),
        }
    }

    /// As a shared board for a host's context ([`braid_verbs::HostCtx::with_board`]).
    pub fn shared(self) -> braid_verbs::rendezvous::SharedBoard {
        std::rc::Rc::new(std::cell::RefCell::new(self))
    }
}

impl Rendezvous for NetBoard {
    fn publish(&mut self, conn: u64, side: Side, ep: Endpoint) {
        self.shared
            .map
            .lock()
            .expect("board lock")
            .insert((conn, side), ep);
        self.shared.send_all(&encode(conn, side, &ep), None);
    }
    fn lookup(&self, conn: u64, side: Side) -> Option<Endpoint> {
        self.shared
            .map
            .lock()
            .expect("board lock")
            .get(&(conn, side))
            .copied()
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
        assert!(l.ends_with(" -\n"), "no PSN known yet: {l:?}");
        assert_eq!(decode(&l).unwrap(), (3, Side::Server, e));
        assert!(decode("ep 3 nobody 1 2 3 4 -").is_err());
        assert!(decode("ep 3 server 1 2 3 -").is_err());
        assert!(decode("ep 3 server 1 2 3 4").is_err(), "no PSN field");
        assert!(
            decode("ep 3 server 1 2 3 4 16777216").is_err(),
            "PSN beyond 24 bits"
        );
    }

    #[test]
    fn an_endpoint_carries_its_initial_psn_to_the_peer() {
        let e = Endpoint {
            host: 0x0a00_0009,
            qpn: 23,
            addr: 0x2000,
            rkey: 5,
        };
        crate::psn::record(e.host, e.qpn, 0xAB_CDEF);
        let l = encode(1, Side::Client, &e);
        assert!(l.ends_with(" 11259375\n"), "{l:?}");
        // The peer's process learns it from the line.
        let (other_host, other_qpn) = (0x0a00_000a, 23);
        let relayed = l.replace("167772169", &other_host.to_string());
        decode(&relayed).unwrap();
        assert_eq!(crate::psn::lookup(other_host, other_qpn), Some(0xAB_CDEF));
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

    #[test]
    fn a_net_board_carries_entries_between_hosts_live_and_to_late_joiners() {
        let port = 19515 + (std::process::id() % 1000) as u16;
        let ep = |q| Endpoint {
            host: 9,
            qpn: q,
            addr: 0,
            rkey: 0,
        };
        let mut hub = NetBoard::serve(port).unwrap();
        hub.publish(1, Side::Server, ep(1));
        let mut a = NetBoard::join("127.0.0.1", port, Duration::from_secs(10)).unwrap();
        let b = NetBoard::join("127.0.0.1", port, Duration::from_secs(10)).unwrap();
        a.publish(2, Side::Client, ep(2));
        // Hub and a on one thread, b on another: all three reach the barrier.
        let t = std::thread::spawn(move || {
            assert!(b.barrier(2, Duration::from_secs(10)));
            (b.lookup(1, Side::Server), b.lookup(2, Side::Client))
        });
        let ta = std::thread::spawn(move || {
            assert!(a.barrier(2, Duration::from_secs(10)));
            a.lookup(1, Side::Server)
        });
        assert!(hub.barrier(2, Duration::from_secs(10)));
        assert_eq!(hub.lookup(2, Side::Client), Some(ep(2)));
        assert_eq!(
            ta.join().unwrap(),
            Some(ep(1)),
            "a late joiner gets what was there"
        );
        assert_eq!(
            t.join().unwrap(),
            (Some(ep(1)), Some(ep(2))),
            "the hub relays one host's entry to the others"
        );
        assert_eq!(hub.lookup(3, Side::Client), None);
        // A barrier nobody else reaches times out.
        assert!(!hub.barrier(2, Duration::from_millis(50)));
    }
}
