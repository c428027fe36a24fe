//! The addresses `mlprof capture` profiles: `host:port`, `grpc://host:port` (as TensorBoard's
//! "Capture Profile" accepts them) or `[v6addr]:port`, alone or comma-separated.
//!
//! A [`Target`] keeps the address as the user wrote it minus the `grpc://` prefix, because
//! that exact text travels as `ProfileRequest.host_name` and names the files on both sides:
//! TensorFlow's client and server both use it with every `:` turned into `_`
//! ([`Target::file_stem`]), so a profile the server wrote and one this client wrote for the
//! same address have the same name.

use std::fmt;
use std::net::Ipv6Addr;

/// One profiler server to capture from.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Target {
    /// Host name or IP address, without the brackets of an IPv6 address.
    host: String,
    /// TCP port (1–65535).
    port: u16,
    /// Whether `host` is an IPv6 address (written in brackets).
    ipv6: bool,
}

/// Why an address was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AddressError {
    /// An empty address (or an empty entry in a comma-separated list).
    #[error("empty address in {list:?}; expected host:port, e.g. localhost:6009")]
    Empty {
        /// The whole text that held the empty entry.
        list: String,
    },
    /// A scheme other than `grpc://`.
    #[error("invalid address {address:?}: only grpc:// addresses are supported (or plain host:port)")]
    Scheme {
        /// The address as given.
        address: String,
    },
    /// No `:port` after the host.
    #[error("invalid address {address:?}: no port; expected host:port, e.g. localhost:6009")]
    MissingPort {
        /// The address as given.
        address: String,
    },
    /// The port is not a number from 1 to 65535.
    #[error("invalid address {address:?}: port {port:?} is not a number from 1 to 65535")]
    BadPort {
        /// The address as given.
        address: String,
        /// The text after the last `:`.
        port: String,
    },
    /// The host part is empty or holds characters no host name has.
    #[error("invalid address {address:?}: bad host {host:?}")]
    BadHost {
        /// The address as given.
        address: String,
        /// The host part.
        host: String,
    },
    /// An IPv6 address without brackets (its colons make the port ambiguous).
    #[error("invalid address {address:?}: write IPv6 addresses in brackets, e.g. [::1]:6009")]
    UnbracketedIpv6 {
        /// The address as given.
        address: String,
    },
    /// The same address twice in one list (both workers would write the same file).
    #[error("address {address:?} is listed twice")]
    Duplicate {
        /// The repeated address.
        address: String,
    },
}

impl Target {
    /// Parses one address: `host:port`, `grpc://host:port`, `[::1]:port` or
    /// `grpc://[::1]:port`; surrounding spaces are ignored.
    pub fn parse(text: &str) -> Result<Target, AddressError> {
        let address = text.trim();
        if address.is_empty() {
            return Err(AddressError::Empty { list: text.to_string() });
        }
        let owned = || address.to_string();
        let rest = match address.get(..7) {
            Some(prefix) if prefix.eq_ignore_ascii_case("grpc://") => &address[7..],
            _ if address.contains("://") => return Err(AddressError::Scheme { address: owned() }),
            _ => address,
        };
        let (host, port, ipv6) = if let Some(bracketed) = rest.strip_prefix('[') {
            let (inside, after) = bracketed
                .split_once(']')
                .ok_or_else(|| AddressError::BadHost { address: owned(), host: rest.into() })?;
            if inside.parse::<Ipv6Addr>().is_err() {
                return Err(AddressError::BadHost { address: owned(), host: inside.to_string() });
            }
            let port = after.strip_prefix(':').ok_or_else(|| AddressError::MissingPort { address: owned() })?;
            (inside, port, true)
        } else {
            let (host, port) = rest.rsplit_once(':').ok_or_else(|| AddressError::MissingPort { address: owned() })?;
            if host.contains(':') {
                return Err(AddressError::UnbracketedIpv6 { address: owned() });
            }
            let valid = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_');
            if host.is_empty() || !host.chars().all(valid) {
                return Err(AddressError::BadHost { address: owned(), host: host.to_string() });
            }
            (host, port, false)
        };
        let bad_port = || AddressError::BadPort { address: owned(), port: port.to_string() };
        if port.is_empty() || !port.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad_port());
        }
        let port: u16 = port.parse().map_err(|_| bad_port())?;
        if port == 0 {
            return Err(bad_port());
        }
        Ok(Target { host: host.to_string(), port, ipv6 })
    }

    /// Parses a comma-separated list (`grpc://10.0.0.2:8466,grpc://10.0.0.3:8466`, as
    /// TensorFlow's `client.trace` takes it); empty entries and repeats are errors.
    pub fn parse_list(text: &str) -> Result<Vec<Target>, AddressError> {
        let mut targets: Vec<Target> = Vec::new();
        for entry in text.split(',') {
            if entry.trim().is_empty() {
                return Err(AddressError::Empty { list: text.to_string() });
            }
            let target = Target::parse(entry)?;
            if targets.iter().any(|t| t.file_stem().eq_ignore_ascii_case(&target.file_stem())) {
                return Err(AddressError::Duplicate { address: target.host_port() });
            }
            targets.push(target);
        }
        Ok(targets)
    }

    /// The host name or IP address (IPv6 without brackets).
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The TCP port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `host:port` (`[v6]:port` for IPv6): what is sent as `ProfileRequest.host_name`.
    pub fn host_port(&self) -> String {
        if self.ipv6 { format!("[{}]:{}", self.host, self.port) } else { format!("{}:{}", self.host, self.port) }
    }

    /// The URI the gRPC channel connects to (plaintext HTTP/2, as TensorFlow's servers speak).
    pub fn uri(&self) -> String {
        format!("http://{}", self.host_port())
    }

    /// The file name stem for this worker's profile: [`Target::host_port`] with every `:`
    /// replaced by `_` (`localhost_6009`, `[__1]_6009`), as TensorFlow's `SaveProfile` and
    /// profiler server name `<stem>.xplane.pb`.
    pub fn file_stem(&self) -> String {
        self.host_port().replace(':', "_")
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.host_port())
    }
}

#[cfg(test)]
mod tests {
    use super::{AddressError, Target};

    #[test]
    fn accepts_what_tensorboard_accepts() {
        let t = Target::parse("localhost:6009").unwrap();
        assert_eq!((t.host(), t.port()), ("localhost", 6009));
        assert_eq!(t.host_port(), "localhost:6009");
        assert_eq!(t.uri(), "http://localhost:6009");
        assert_eq!(Target::parse("grpc://10.0.0.2:8466").unwrap().host_port(), "10.0.0.2:8466");
        assert_eq!(Target::parse(" GRPC://worker-1.cluster_a:1 ").unwrap().host_port(), "worker-1.cluster_a:1");
        let v6 = Target::parse("grpc://[::1]:6009").unwrap();
        assert_eq!((v6.host(), v6.port()), ("::1", 6009));
        assert_eq!(v6.host_port(), "[::1]:6009");
        assert_eq!(v6.uri(), "http://[::1]:6009");
    }

    #[test]
    fn file_stems_replace_colons_like_save_profile() {
        assert_eq!(Target::parse("localhost:6009").unwrap().file_stem(), "localhost_6009");
        assert_eq!(Target::parse("grpc://10.0.0.2:8466").unwrap().file_stem(), "10.0.0.2_8466");
        assert_eq!(Target::parse("[fe80::1]:80").unwrap().file_stem(), "[fe80__1]_80");
    }

    #[test]
    fn rejects_bad_addresses_with_the_reason() {
        let missing = |s: &str| matches!(Target::parse(s), Err(AddressError::MissingPort { .. }));
        let bad_port = |s: &str| matches!(Target::parse(s), Err(AddressError::BadPort { .. }));
        let bad_host = |s: &str| matches!(Target::parse(s), Err(AddressError::BadHost { .. }));
        assert!(matches!(Target::parse(""), Err(AddressError::Empty { .. })));
        assert!(matches!(Target::parse("   "), Err(AddressError::Empty { .. })));
        assert!(missing("localhost"));
        assert!(missing("grpc://localhost"));
        assert!(missing("[::1]"));
        assert!(bad_port("localhost:"));
        assert!(bad_port("localhost:http"));
        assert!(bad_port("localhost:60o9"));
        assert!(bad_port("localhost:+6009"));
        assert!(bad_port("localhost:65536"));
        assert!(bad_port("localhost:0"));
        assert!(bad_port("localhost:6009/"));
        assert!(bad_port("[::1]:x"));
        assert!(bad_host(":6009"));
        assert!(bad_host("local host:6009"));
        assert!(bad_host("a/b:6009"));
        assert!(bad_host("[::g]:6009"));
        assert!(bad_host("[::1:6009"));
        assert!(matches!(Target::parse("::1:6009"), Err(AddressError::UnbracketedIpv6 { .. })));
        assert!(matches!(Target::parse("http://localhost:6009"), Err(AddressError::Scheme { .. })));
        let message = Target::parse("localhost").unwrap_err().to_string();
        assert_eq!(message, "invalid address \"localhost\": no port; expected host:port, e.g. localhost:6009");
    }

    #[test]
    fn lists_split_on_commas_without_empty_or_repeated_entries() {
        let list = Target::parse_list("grpc://10.0.0.2:8466, 10.0.0.3:8466").unwrap();
        let shown: Vec<String> = list.iter().map(Target::to_string).collect();
        assert_eq!(shown, ["10.0.0.2:8466", "10.0.0.3:8466"]);
        assert!(matches!(Target::parse_list("a:1,,b:2"), Err(AddressError::Empty { .. })));
        assert!(matches!(Target::parse_list("a:1,"), Err(AddressError::Empty { .. })));
        assert!(matches!(Target::parse_list(""), Err(AddressError::Empty { .. })));
        assert!(matches!(Target::parse_list("a:1,grpc://a:1"), Err(AddressError::Duplicate { .. })));
        assert!(matches!(Target::parse_list("a:1,b"), Err(AddressError::MissingPort { .. })));
    }
}
