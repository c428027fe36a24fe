//! `s3://BUCKET[/PREFIX]` and `gs://BUCKET[/PREFIX]`: where in which store.
//!
//! The prefix is kept as plain parts (no empty, `.` or `..` part), so the keys made
//! under it are the ones the user named, and its text form is canonical (no doubled or
//! trailing `/`), which also names its local cache.

use std::fmt;

/// Which store a URL names (both spoken through S3's protocol).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scheme {
    /// Amazon S3, or any S3-compatible store (`AWS_ENDPOINT_URL`).
    S3,
    /// Google Cloud Storage, through its S3-compatible XML API.
    Gs,
}

impl Scheme {
    /// `s3` or `gs`.
    pub fn as_str(self) -> &'static str {
        match self {
            Scheme::S3 => "s3",
            Scheme::Gs => "gs",
        }
    }
}

/// A place in an object store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoreUrl {
    /// The store.
    pub scheme: Scheme,
    /// The bucket.
    pub bucket: String,
    /// The prefix's parts, none empty, `.` or `..`.
    pub prefix: Vec<String>,
}

/// Why a text is not a store URL.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{text:?} is not an object store URL: {why} (expected s3://BUCKET[/PREFIX] or gs://BUCKET[/PREFIX])")]
pub struct BadUrl {
    text: String,
    why: &'static str,
}

impl StoreUrl {
    /// Whether `text` is meant as a store URL (it starts with `s3://` or `gs://`), so a
    /// caller knows to parse it as one rather than as a file path.
    pub fn is_store_url(text: &str) -> bool {
        text.starts_with("s3://") || text.starts_with("gs://")
    }

    /// Parses `s3://BUCKET[/PREFIX]` or `gs://BUCKET[/PREFIX]`.
    pub fn parse(text: &str) -> Result<StoreUrl, BadUrl> {
        let bad = |why| BadUrl { text: text.to_string(), why };
        let (scheme, rest) = if let Some(rest) = text.strip_prefix("s3://") {
            (Scheme::S3, rest)
        } else if let Some(rest) = text.strip_prefix("gs://") {
            (Scheme::Gs, rest)
        } else {
            return Err(bad("not s3:// or gs://"));
        };
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        let bucket_char = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '.' | '_');
        if bucket.len() < 3 || bucket.len() > 222 || !bucket.chars().all(bucket_char) {
            return Err(bad("a bucket name is 3 to 222 lowercase letters, digits, '-', '.' or '_'"));
        }
        let mut parts = Vec::new();
        for part in prefix.split('/').filter(|p| !p.is_empty()) {
            if part == "." || part == ".." || part.chars().any(|c| c.is_control()) {
                return Err(bad("a prefix holds no '.', '..' or control characters"));
            }
            parts.push(part.to_string());
        }
        Ok(StoreUrl { scheme, bucket: bucket.to_string(), prefix: parts })
    }

    /// The URL of `parts` under this one.
    pub fn join<'a>(&self, parts: impl IntoIterator<Item = &'a str>) -> StoreUrl {
        let mut url = self.clone();
        url.prefix.extend(parts.into_iter().map(str::to_string));
        url
    }
}

impl fmt::Display for StoreUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}://{}", self.scheme.as_str(), self.bucket)?;
        for part in &self.prefix {
            write!(f, "/{part}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_parse_to_their_canonical_form() {
        let url = StoreUrl::parse("s3://profiles//node1/").expect("valid");
        assert_eq!(url.scheme, Scheme::S3);
        assert_eq!(url.bucket, "profiles");
        assert_eq!(url.prefix, ["node1"]);
        assert_eq!(url.to_string(), "s3://profiles/node1");
        assert_eq!(StoreUrl::parse("gs://b-1.x").expect("valid").to_string(), "gs://b-1.x");
        assert_eq!(url.join(["a", "b"]).to_string(), "s3://profiles/node1/a/b");
    }

    #[test]
    fn what_is_not_a_store_url_says_why() {
        for text in ["s3://", "s3://UPPER", "s3://ok/../x", "s3://ok/./x", "http://x/y", "s3://ab", "gs://ok/a\u{1}b"] {
            let error = StoreUrl::parse(text).expect_err(text).to_string();
            assert!(error.contains("is not an object store URL"), "{error}");
        }
        assert!(StoreUrl::is_store_url("gs://x") && !StoreUrl::is_store_url("/tmp/s3://x"));
    }
}
