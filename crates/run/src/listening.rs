//! The TCP ports a process listens on, from `/proc/PID/net/tcp` and `tcp6` (every
//! socket in the process's network namespace) matched against the socket inodes in
//! `/proc/PID/fd`: how `mlprof attach` finds a profiler server a job already runs.

use std::collections::HashSet;

/// The `LISTEN` state in `/proc/net/tcp`.
const LISTEN: &str = "0A";

/// One listening socket of a `/proc/net/tcp{,6}` table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listener {
    /// The local port.
    pub port: u16,
    /// The socket's inode.
    pub inode: u64,
    /// Bound to a loopback or wildcard address (reachable from this machine as 127.0.0.1
    /// or ::1).
    pub local: bool,
}

/// The listening sockets in a `/proc/net/tcp` or `tcp6` table's text; lines that do
/// not parse are skipped.
pub fn parse_table(text: &str) -> Vec<Listener> {
    text.lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_ascii_whitespace().collect();
            let (address, port) = fields.get(1)?.split_once(':')?;
            if *fields.get(3)? != LISTEN {
                return None;
            }
            let port = u16::from_str_radix(port, 16).ok()?;
            let inode = fields.get(9)?.parse().ok()?;
            Some(Listener { port, inode, local: is_local(address) })
        })
        .collect()
}

/// Whether a hex address from the table is loopback or the wildcard (IPv4 in network
/// byte order as a little-endian word, IPv6 as four such words).
fn is_local(hex: &str) -> bool {
    match hex.len() {
        8 => matches!(u32::from_str_radix(hex, 16).map(u32::from_be), Ok(a) if a == 0 || a >> 24 == 0x7f),
        32 => {
            let wildcard = hex.bytes().all(|b| b == b'0');
            let loopback = hex == "00000000000000000000000001000000";
            // ::ffff:127.x.y.z
            let mapped = hex.starts_with("0000000000000000FFFF0000") && hex.get(30..32) == Some("7F");
            wildcard || loopback || mapped
        }
        _ => false,
    }
}

/// The socket inodes `pid` holds open (its `/proc/PID/fd` links `socket:[inode]`).
fn socket_inodes(pid: u32) -> HashSet<u64> {
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
    let mut ports: Vec<u16> = ["tcp", "tcp6"]
        .iter()
        .filter_map(|table| std::fs::read_to_string(format!("/proc/{pid}/net/{table}")).ok())
        .flat_map(|text| parse_table(&text))
        .filter(|l| l.local && inodes.contains(&l.inode))
        .map(|l| l.port)
        .collect();
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
        assert_eq!(
            parse_table(table),
            [
                Listener { port: 8080, inode: 4242, local: true },
                Listener { port: 22, inode: 17, local: true },
                Listener { port: 50000, inode: 18, local: false },
            ]
        );
        assert!(is_local("00000000000000000000000001000000"));
        assert!(is_local("0000000000000000FFFF00000100007F"));
        assert!(!is_local("20010DB8000000000000000000000001"));
    }

    #[test]
    fn a_port_this_process_listens_on_is_found() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        assert!(local_ports(std::process::id()).contains(&port));
    }
}
