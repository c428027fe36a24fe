//! A connection to one store, configured from the environment as AWS's tools are, with
//! limits that keep a slow or unreachable store from holding mlprof for long.
//!
//! Every request gives up after [`CONNECT_TIMEOUT`] to connect and [`REQUEST_TIMEOUT`]
//! in all, and is retried at most [`MAX_RETRIES`] times within [`RETRY_TIMEOUT`]; an
//! error reads as one line naming the URL.

use std::sync::Arc;
use std::time::Duration;

use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::{ClientOptions, ObjectStore, RetryConfig};

use crate::url::{BadUrl, Scheme, StoreUrl};

/// The longest wait for a connection.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// The longest one request may take, its body included (a part of an upload, a whole
/// profile file downloaded).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(300);
/// How often a failed request is tried again.
pub const MAX_RETRIES: usize = 3;
/// How long a request is tried again in all.
pub const RETRY_TIMEOUT: Duration = Duration::from_secs(30);
/// GCS's S3-compatible endpoint, for `gs://` when no endpoint is set.
pub const GCS_ENDPOINT: &str = "https://storage.googleapis.com";

/// What went wrong with a store, in one line.
#[derive(Debug, thiserror::Error)]
pub enum ObjectsError {
    /// The URL is not one.
    #[error(transparent)]
    Url(#[from] BadUrl),
    /// The store refused or failed a request.
    #[error("{url}: {what}: {why}")]
    Store {
        /// Where.
        url: String,
        /// What was being done.
        what: &'static str,
        /// Why, in one line.
        why: String,
    },
    /// A local file or directory could not be read or written.
    #[error("{path}: {why}")]
    Local {
        /// The file.
        path: String,
        /// Why.
        why: String,
    },
}

impl ObjectsError {
    /// A store error, its causes joined into one line.
    pub(crate) fn store(url: &StoreUrl, what: &'static str, error: &dyn std::error::Error) -> ObjectsError {
        ObjectsError::Store { url: url.to_string(), what, why: one_line(error) }
    }

    /// A local error on `path`.
    pub(crate) fn local(path: &std::path::Path, error: impl std::fmt::Display) -> ObjectsError {
        ObjectsError::Local { path: path.display().to_string(), why: one_line_text(&error.to_string()) }
    }
}

/// Why `error` happened, in one line: a store's own error code and message where it
/// answered one (`NoSuchBucket: The specified bucket does not exist`), else the client's
/// reason without the request it was making (which names no more than the URL does).
fn one_line(error: &dyn std::error::Error) -> String {
    let mut texts = vec![error.to_string()];
    let mut source = error.source();
    while let Some(cause) = source {
        texts.push(cause.to_string());
        source = cause.source();
    }
    let tag = |text: &str, name: &str| {
        let open = format!("<{name}>");
        let start = text.find(&open)? + open.len();
        Some(text[start..].split('<').next()?.to_string())
    };
    if let Some(answer) = texts.iter().find(|t| t.contains("<Code>")) {
        let code = tag(answer, "Code").unwrap_or_default();
        let message = tag(answer, "Message").map(|m| format!(": {m}")).unwrap_or_default();
        return one_line_text(&format!("{code}{message}"));
    }
    let top = &texts[0];
    let mut why = top.split_once(" - ").map_or(top.as_str(), |(_, why)| why).to_string();
    if let Some(retries) = top.split(", ").find(|part| part.starts_with("after ") && part.ends_with("retries")) {
        why = format!("{why} ({retries})");
    }
    one_line_text(&why)
}

/// `text` on one line, at most 400 characters.
fn one_line_text(text: &str) -> String {
    let mut line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.chars().count() > 400 {
        line = line.chars().take(399).collect::<String>() + "…";
    }
    line
}

/// One store and the prefix mlprof works under.
#[derive(Clone, Debug)]
pub struct Store {
    url: StoreUrl,
    inner: Arc<dyn ObjectStore>,
}

impl Store {
    /// Connects (lazily: nothing is sent yet) to `url`'s bucket with the credentials,
    /// region and endpoint of the `AWS_*` variables (`AWS_ACCESS_KEY_ID`,
    /// `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`, `AWS_ENDPOINT_URL`, `AWS_ALLOW_HTTP`, …,
    /// or an instance's or pod's role). `gs://` goes to [`GCS_ENDPOINT`] unless an
    /// endpoint is set.
    pub fn open(url: &StoreUrl) -> Result<Store, ObjectsError> {
        let vars =
            std::env::vars_os().filter_map(|(key, value)| Some((key.into_string().ok()?, value.into_string().ok()?)));
        Store::open_with(url, vars)
    }

    /// [`Store::open`] with `vars` in place of the environment.
    pub fn open_with(url: &StoreUrl, vars: impl IntoIterator<Item = (String, String)>) -> Result<Store, ObjectsError> {
        // reqwest's TLS takes the process's default provider; one may be installed already.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = ClientOptions::new().with_connect_timeout(CONNECT_TIMEOUT).with_timeout(REQUEST_TIMEOUT);
        let retry = RetryConfig { max_retries: MAX_RETRIES, retry_timeout: RETRY_TIMEOUT, ..RetryConfig::default() };
        // The client's limits first: the variables may set more of its options (AWS_ALLOW_HTTP).
        let mut builder =
            AmazonS3Builder::new().with_client_options(client).with_retry(retry).with_bucket_name(&url.bucket);
        let (mut endpoint_set, mut region_set) = (false, false);
        for (key, value) in vars {
            if !key.starts_with("AWS_") || value.is_empty() {
                continue;
            }
            if let Ok(config) = key.to_ascii_lowercase().parse::<AmazonS3ConfigKey>() {
                endpoint_set |= matches!(config, AmazonS3ConfigKey::Endpoint | AmazonS3ConfigKey::S3Endpoint);
                region_set |= matches!(config, AmazonS3ConfigKey::Region);
                builder = builder.with_config(config, value);
            }
        }
        if url.scheme == Scheme::Gs && !endpoint_set {
            builder = builder.with_endpoint(GCS_ENDPOINT);
        }
        if url.scheme == Scheme::Gs && !region_set {
            builder = builder.with_region("auto");
        }
        let inner = builder.build().map_err(|error| ObjectsError::store(url, "cannot use this store", &error))?;
        Ok(Store { url: url.clone(), inner: Arc::new(inner) })
    }

    /// Checks that the store answers and lets these credentials list the prefix: a
    /// wrong bucket, key or endpoint is found at start, not at the first upload.
    pub async fn check(&self) -> Result<(), ObjectsError> {
        let prefix = self.key([]);
        match self.inner.list_with_delimiter(Some(&prefix)).await {
            Ok(_) => Ok(()),
            Err(error) => Err(ObjectsError::store(&self.url, "cannot list", &error)),
        }
    }

    /// The URL this store works under.
    pub fn url(&self) -> &StoreUrl {
        &self.url
    }

    /// The client.
    pub(crate) fn inner(&self) -> &dyn ObjectStore {
        self.inner.as_ref()
    }

    /// The URL of `key` (a whole key, the prefix included).
    pub(crate) fn url_of(&self, key: &object_store::path::Path) -> StoreUrl {
        let prefix = key.parts().map(|part| part.as_ref().to_string()).collect();
        StoreUrl { prefix, ..self.url.clone() }
    }

    /// The key of `parts` under the prefix.
    pub(crate) fn key<'a>(&self, parts: impl IntoIterator<Item = &'a str>) -> object_store::path::Path {
        let owned = |part: &str| object_store::path::PathPart::from(part.to_string());
        self.url.prefix.iter().map(|part| owned(part)).chain(parts.into_iter().map(owned)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_store_opens_without_sending_anything_and_keys_sit_under_its_prefix() {
        let url = StoreUrl::parse("gs://bucket/a/b").expect("valid");
        let store = Store::open(&url).expect("opens");
        assert_eq!(store.key(["run", "x y"]).as_ref(), "a/b/run/x y");
        assert_eq!(store.url().to_string(), "gs://bucket/a/b");
    }

    #[test]
    fn errors_read_as_one_line() {
        let io = std::io::Error::other("first\n  second");
        assert_eq!(one_line(&io), "first second");
        let answered = std::io::Error::other(
            "Error performing GET http://h/b in 2ms - Server returned non-2xx status code: 404 Not Found: \
             <?xml?><Error><Code>NoSuchBucket</Code><Message>The specified bucket does not exist</Message></Error>",
        );
        assert_eq!(one_line(&answered), "NoSuchBucket: The specified bucket does not exist");
        let refused = std::io::Error::other(
            "Error performing GET http://h/b in 5ms, after 3 retries, max_retries: 3 - HTTP error: connection refused",
        );
        assert_eq!(one_line(&refused), "HTTP error: connection refused (after 3 retries)");
        assert_eq!(one_line_text(&"x".repeat(1000)).chars().count(), 400);
    }
}
