//! The listening TCP sockets of this process's network namespace, asked of the kernel's
//! socket diagnostics (`NETLINK_SOCK_DIAG`, as `ss -lt` does). The design decision:
//! reading `/proc/net/tcp` makes the kernel walk every bucket of the established-connection
//! table to print the few listening sockets, milliseconds a read on a machine with much
//! memory (41 % of an idle agent's CPU went there); a dump asked for the `LISTEN` state
//! walks only the listening table. Callers fall back to the `/proc` tables where netlink
//! is refused (a sandbox) and for other namespaces.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use crate::listening::Listener;

/// `NETLINK_SOCK_DIAG`.
const NETLINK_SOCK_DIAG: libc::c_int = 4;
/// `SOCK_DIAG_BY_FAMILY`: the request type.
const SOCK_DIAG_BY_FAMILY: u16 = 20;
/// `NLMSG_ERROR` and `NLMSG_DONE`.
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
/// `NLM_F_REQUEST | NLM_F_DUMP`.
const DUMP_REQUEST: u16 = 0x1 | 0x300;
/// `TCP_LISTEN` in the kernel's TCP states.
const TCP_LISTEN: u32 = 10;
/// `struct nlmsghdr`'s size, bytes.
const HEADER: usize = 16;
/// `struct inet_diag_req_v2`'s size, bytes.
const REQUEST: usize = 56;
/// `struct inet_diag_msg`'s size, bytes.
const MESSAGE: usize = 72;
/// How long a dump may take before the answer so far is given up, per receive.
const RECEIVE_WAIT: libc::time_t = 2;

/// Every listening TCP socket (IPv4 and IPv6) of this process's network namespace.
pub fn listeners() -> io::Result<Vec<Listener>> {
    let mut all = dump(libc::AF_INET as u8)?;
    match dump(libc::AF_INET6 as u8) {
        Ok(v6) => all.extend(v6),
        // A kernel without IPv6 has no such table.
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
        Err(e) => return Err(e),
    }
    Ok(all)
}

/// One family's dump.
fn dump(family: u8) -> io::Result<Vec<Listener>> {
    // SAFETY: socket has no pointer arguments; a negative result is an error.
    let fd = unsafe { libc::socket(libc::AF_NETLINK, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, NETLINK_SOCK_DIAG) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a new descriptor this function owns.
    let socket = unsafe { OwnedFd::from_raw_fd(fd) };
    let wait = libc::timeval { tv_sec: RECEIVE_WAIT, tv_usec: 0 };
    // SAFETY: `wait` is a valid timeval of the size passed.
    let set = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            (&raw const wait).cast(),
            std::mem::size_of::<libc::timeval>() as libc::socklen_t,
        )
    };
    if set < 0 {
        return Err(io::Error::last_os_error());
    }
    let request = request(family);
    // SAFETY: `request` is a valid buffer of its length; the kernel is the destination
    // (a zeroed sockaddr_nl).
    let sent = unsafe {
        let mut kernel: libc::sockaddr_nl = std::mem::zeroed();
        kernel.nl_family = libc::AF_NETLINK as libc::sa_family_t;
        libc::sendto(
            socket.as_raw_fd(),
            request.as_ptr().cast(),
            request.len(),
            0,
            (&raw const kernel).cast(),
            std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
        )
    };
    if sent < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut listeners = Vec::new();
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        // SAFETY: `buffer` is writable for its whole length.
        let got = unsafe { libc::recv(socket.as_raw_fd(), buffer.as_mut_ptr().cast(), buffer.len(), 0) };
        if got < 0 {
            let error = io::Error::last_os_error();
            if error.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(error);
        }
        let got = usize::try_from(got).unwrap_or(0);
        match parse(buffer.get(..got).unwrap_or_default(), &mut listeners) {
            Batch::More if got > 0 => {}
            Batch::More => return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "sock_diag: the dump ended early")),
            Batch::Done => return Ok(listeners),
            Batch::Failed(errno) => return Err(io::Error::from_raw_os_error(errno)),
        }
    }
}

/// The dump request: `nlmsghdr` then `inet_diag_req_v2` for TCP sockets of `family` in
/// the listening state.
fn request(family: u8) -> [u8; HEADER + REQUEST] {
    let mut bytes = [0u8; HEADER + REQUEST];
    bytes[0..4].copy_from_slice(&((HEADER + REQUEST) as u32).to_ne_bytes());
    bytes[4..6].copy_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    bytes[6..8].copy_from_slice(&DUMP_REQUEST.to_ne_bytes());
    bytes[8..12].copy_from_slice(&1u32.to_ne_bytes());
    bytes[HEADER] = family;
    bytes[HEADER + 1] = libc::IPPROTO_TCP as u8;
    bytes[HEADER + 4..HEADER + 8].copy_from_slice(&(1u32 << TCP_LISTEN).to_ne_bytes());
    bytes
}

/// What one received datagram says.
#[derive(Debug, PartialEq, Eq)]
pub enum Batch {
    /// More datagrams follow.
    More,
    /// The dump is complete.
    Done,
    /// The kernel refused the request (its errno).
    Failed(i32),
}

/// Adds the listening sockets of one datagram of a dump to `listeners`. Messages that are
/// cut short or of another type are skipped; a datagram never makes it panic.
pub fn parse(datagram: &[u8], listeners: &mut Vec<Listener>) -> Batch {
    let mut at = 0;
    while let Some(header) = datagram.get(at..at + HEADER) {
        let length = u32::from_ne_bytes([header[0], header[1], header[2], header[3]]) as usize;
        let kind = u16::from_ne_bytes([header[4], header[5]]);
        if length < HEADER {
            break;
        }
        let end = at.saturating_add(length).min(datagram.len());
        let body = datagram.get(at + HEADER..end).unwrap_or_default();
        match kind {
            NLMSG_DONE => return Batch::Done,
            NLMSG_ERROR => {
                let errno = body.get(0..4).map_or(0, |b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]));
                return if errno == 0 { Batch::Done } else { Batch::Failed(errno.checked_neg().unwrap_or(libc::EIO)) };
            }
            SOCK_DIAG_BY_FAMILY => listeners.extend(listener(body)),
            _ => {}
        }
        // Messages are aligned to 4 bytes.
        at = at.saturating_add(length.saturating_add(3) & !3);
    }
    Batch::More
}

/// One `inet_diag_msg`'s socket.
fn listener(message: &[u8]) -> Option<Listener> {
    let message = message.get(..MESSAGE)?;
    let word = |at: usize| u32::from_ne_bytes([message[at], message[at + 1], message[at + 2], message[at + 3]]);
    let family = i32::from(message[0]);
    // `id` starts at byte 4: source port (big-endian), destination port, then the source
    // address (4 or 16 bytes in a 16-byte field).
    let port = u16::from_be_bytes([message[4], message[5]]);
    let source = &message[8..24];
    let address = if family == libc::AF_INET {
        IpAddr::V4(Ipv4Addr::new(source[0], source[1], source[2], source[3]))
    } else {
        IpAddr::V6(Ipv6Addr::from(<[u8; 16]>::try_from(source).ok()?))
    };
    Some(Listener::new(address, port, word(64), u64::from(word(68))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_socket_this_process_listens_on_is_in_the_dump_with_its_owner() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let found = listeners().expect("netlink sock_diag answers in this namespace");
        let mine = found.iter().find(|l| l.port == port).expect("the port is listed");
        // SAFETY: geteuid has no arguments and cannot fail.
        assert_eq!(mine.uid, unsafe { libc::geteuid() });
        assert_eq!(mine.address, IpAddr::V4(Ipv4Addr::LOCALHOST));
        assert!(mine.local);
    }

    #[test]
    fn datagrams_cut_anywhere_never_panic() {
        let mut datagram = Vec::new();
        let mut message = [0u8; HEADER + MESSAGE];
        message[0..4].copy_from_slice(&((HEADER + MESSAGE) as u32).to_ne_bytes());
        message[4..6].copy_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
        message[HEADER] = libc::AF_INET as u8;
        message[HEADER + 4..HEADER + 6].copy_from_slice(&8080u16.to_be_bytes());
        message[HEADER + 8..HEADER + 12].copy_from_slice(&[127, 0, 0, 1]);
        message[HEADER + 64..HEADER + 68].copy_from_slice(&1000u32.to_ne_bytes());
        message[HEADER + 68..HEADER + 72].copy_from_slice(&4242u32.to_ne_bytes());
        datagram.extend_from_slice(&message);
        let mut done = [0u8; HEADER + 4];
        done[0..4].copy_from_slice(&((HEADER + 4) as u32).to_ne_bytes());
        done[4..6].copy_from_slice(&NLMSG_DONE.to_ne_bytes());
        datagram.extend_from_slice(&done);
        let mut listeners = Vec::new();
        assert_eq!(parse(&datagram, &mut listeners), Batch::Done);
        assert_eq!(listeners, [Listener::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 8080, 1000, 4242)]);
        for cut in 0..datagram.len() {
            let mut some = Vec::new();
            let _ = parse(&datagram[..cut], &mut some);
            assert!(some.len() <= 1);
        }
        let mut refused = [0u8; HEADER + 4];
        refused[0..4].copy_from_slice(&((HEADER + 4) as u32).to_ne_bytes());
        refused[4..6].copy_from_slice(&NLMSG_ERROR.to_ne_bytes());
        refused[HEADER..].copy_from_slice(&(-libc::EPERM).to_ne_bytes());
        assert_eq!(parse(&refused, &mut Vec::new()), Batch::Failed(libc::EPERM));
        refused[HEADER..].copy_from_slice(&i32::MIN.to_ne_bytes());
        assert_eq!(parse(&refused, &mut Vec::new()), Batch::Failed(libc::EIO));
    }
}
