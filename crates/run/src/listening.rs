//! The TCP ports a process listens on: the listening sockets of its network namespace
//! (from the kernel's socket diagnostics in mlprof's own namespace, else from
//! `/proc/PID/net/tcp` and `tcp6`) matched against the socket inodes in `/proc/PID/fd`.
//! How `mlprof attach` and the agent find a profiler server a job already runs.

use std::collections::HashSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The `LISTEN` state in `/proc/net/tcp`.
const LISTEN: &str = "0A";

/// One listening socket.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listener {
    /// The address it is bound to (unspecified: every address).
    pub address: IpAddr,
    /// The local port.
    pub port: u16,
    /// The user owning it.
    pub uid: u32,
    /// The socket's inode.
    pub inode: u64,
    /// Bound to a loopback or wildcard address (reachable from this machine as 127.0.0.1
    /// or ::1).
    pub local: bool,
}

impl Listener {
    /// A socket listening on `address`:`port`, owned by `uid`.
    pub fn new(address: IpAddr, port: u16, uid: u32, inode: u64) -> Self {
        let address = unmapped(address);
        Listener { address, port, uid, inode, local: address.is_loopback() || address.is_unspecified() }
    }

    /// Whether a connection to `to` may reach it: bound to that address, or to every
    /// address of its family (an IPv6 wildcard also takes IPv4, as dual-stack sockets do).
    pub fn serves(&self, to: std::net::SocketAddr) -> bool {
        let to_ip = unmapped(to.ip());
        let wildcard = self.address.is_unspecified() && (self.address.is_ipv6() || to_ip.is_ipv4());
        self.port == to.port() && (self.address == to_ip || wildcard)
    }
}

/// An IPv4 address written as IPv6 (`::ffff:a.b.c.d`) as the IPv4 address it is.
fn unmapped(address: IpAddr) -> IpAddr {
    match address {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(address, IpAddr::V4),
        v4 => v4,
    }
}

/// The listening sockets in a `/proc/net/tcp` or `tcp6` table's text; lines that do
/// not parse are skipped.
pub fn parse_table(text: &str) -> Vec<Listener> {
    text.lines()
        .skip(1)
        .filter_map(|line| {
            // sl, local_address, rem_address, st, tx:rx, tr:when, retrnsmt, uid, timeout, inode
            let fields: Vec<&str> = line.split_ascii_whitespace().collect();
            let (address, port) = fields.get(1)?.split_once(':')?;
            if *fields.get(3)? != LISTEN {
                return None;
            }
            let port = u16::from_str_radix(port, 16).ok()?;
            let uid = fields.get(7)?.parse().ok()?;
            let inode = fields.get(9)?.parse().ok()?;
            Some(Listener::new(table_address(address)?, port, uid, inode))
        })
        .collect()
}

/// A hex address of the table: IPv4 as one 32-bit word, IPv6 as four, each printed in
/// the host's byte order.
fn table_address(hex: &str) -> Option<IpAddr> {
    if !hex.is_ascii() {
        return None;
    }
    let words: Vec<u32> =
        (0..hex.len() / 8).map(|w| u32::from_str_radix(&hex[w * 8..w * 8 + 8], 16)).collect::<Result<_, _>>().ok()?;
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    match (hex.len(), bytes.len()) {
        (8, 4) => Some(Ipv4Addr::new(bytes[0], bytes[1], bytes[2], bytes[3]).into()),
        (32, 16) => Some(Ipv6Addr::from(<[u8; 16]>::try_from(bytes.as_slice()).ok()?).into()),
        _ => None,
    }
}

/// The network namespace `pid` is in (the inode of `/proc/PID/ns/net`).
pub fn network_namespace(pid: u32) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(format!("/proc/{pid}/ns/net")).ok().map(|m| m.ino())
}

/// Every listening socket of `pid`'s network namespace: asked of the kernel's socket
/// diagnostics when that is mlprof's own namespace, else (or where netlink is refused)
/// read from `/proc/PID/net/tcp` and `tcp6`.
pub fn listeners_of(pid: u32) -> Vec<Listener> {
    let own = network_namespace(std::process::id());
    if own.is_some()
        && own == network_namespace(pid)
        && let Ok(listeners) = crate::sock_diag::listeners()
    {
        return listeners;
    }
    ["tcp", "tcp6"]
        .iter()
        .filter_map(|table| std::fs::read_to_string(format!("/proc/{pid}/net/{table}")).ok())
        .flat_map(|text| parse_table(&text))
        .collect()
}

/// The socket inodes `pid` holds open (its `/proc/PID/fd` links `socket:[inode]`).
pub fn socket_inodes(pid: u32) -> HashSet<u64> {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else { return HashSet::new() };
    fds.filter_map(Result::ok)
        .filter_map(|fd| {
            let target = std::fs::read_link(fd.path()).ok()?;
            target.to_str()?.strip_prefix("socket:[")?.strip_suffix(']')?.parse().ok()
        })
        .collect()
}

/// The ports `pid` listens on that this machine can reach on loopback, in order.
pub fn local_ports(pid: u32) -> Vec<u16> {
    let inodes = socket_inodes(pid);
    if inodes.is_empty() {
        return Vec::new();
    }
    ports_among(&inodes, &listeners_of(pid))
}

/// The loopback-reachable ports of `listeners` whose sockets are among `inodes` (a
/// process's, from [`socket_inodes`]), in order.
pub fn ports_among(inodes: &HashSet<u64>, listeners: &[Listener]) -> Vec<u16> {
    let mut ports: Vec<u16> =
        listeners.iter().filter(|l| l.local && inodes.contains(&l.inode)).map(|l| l.port).collect();
    ports.sort_unstable();
    ports.dedup();
    ports
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listening_rows_with_their_reach() {
        let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 4242 1 0 100 0 0 10 0\n\
   1: 00000000:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 17 1 0 100 0 0 10 0\n\
   2: 0A00020F:C350 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 18 1 0 100 0 0 10 0\n\
   3: 0100007F:1F91 0100007F:D2F0 01 00000000:00000000 00:00000000 00000000  1000        0 19 1 0 100 0 0 10 0\n\
   garbage\n";
        let v4 = |a, b, c, d| IpAddr::V4(Ipv4Addr::new(a, b, c, d));
        assert_eq!(
            parse_table(table),
            [
                Listener::new(v4(127, 0, 0, 1), 8080, 1000, 4242),
                Listener::new(v4(0, 0, 0, 0), 22, 0, 17),
                Listener::new(v4(15, 2, 0, 10), 50000, 0, 18),
            ]
        );
        assert!(parse_table(table)[0].local && parse_table(table)[1].local && !parse_table(table)[2].local);
        let v6 = |hex| table_address(hex).map(|a| Listener::new(a, 1, 0, 0));
        assert!(v6("00000000000000000000000001000000").unwrap().local);
        assert!(v6("0000000000000000FFFF00000100007F").unwrap().local);
        assert!(!v6("B80D0120000000000000000001000000").unwrap().local);
        assert_eq!(table_address("0100007F"), Some(v4(127, 0, 0, 1)));
        assert_eq!(table_address("0000000000000000FFFF00000100007F").map(unmapped), Some(v4(127, 0, 0, 1)));
        assert_eq!(table_address("zz"), None);
        let any = Listener::new(v4(0, 0, 0, 0), 7766, 0, 1);
        assert!(any.serves("127.0.0.1:7766".parse().unwrap()) && !any.serves("127.0.0.1:7767".parse().unwrap()));
        assert!(!any.serves("[::1]:7766".parse().unwrap()), "an IPv4 wildcard takes no IPv6");
        let any6 = Listener::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), 7766, 0, 1);
        assert!(any6.serves("[::1]:7766".parse().unwrap()) && any6.serves("127.0.0.1:7766".parse().unwrap()));
    }

    #[test]
    fn a_port_this_process_listens_on_is_found() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        assert!(local_ports(std::process::id()).contains(&port));
        let from_proc: Vec<Listener> = ["tcp", "tcp6"]
            .iter()
            .filter_map(|t| std::fs::read_to_string(format!("/proc/self/net/{t}")).ok())
            .flat_map(|text| parse_table(&text))
            .collect();
        assert!(from_proc.iter().any(|l| l.port == port && l.local), "the /proc tables list it too");
    }
}
