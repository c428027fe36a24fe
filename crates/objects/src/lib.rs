//! Profiles in object stores: what the agent captures is uploaded in TensorBoard's
//! layout (`PREFIX/<run>/plugins/profile/<session>/<host>.xplane.pb`), so XProf,
//! TensorBoard and `mlprof serve` read it from there; and a store's profiles are
//! mirrored into a local cache, which `mlprof serve` then serves like any log directory.
//!
//! The one design decision to know: mlprof reads profiles through memory maps, so a
//! store is never read in place — [`mirror::Mirror`] copies its sessions, whole and
//! checked, into a cache, and each session appears there at once (staged, then renamed
//! into place) or not at all. Keys come from the store and are not trusted: only
//! `…/plugins/profile/<session>/<profile file>` keys whose every part is a plain name
//! become files, always inside the cache ([`layout`]).
//!
//! Only S3's protocol is spoken: `s3://` is Amazon S3 or any S3-compatible store
//! (`AWS_ENDPOINT_URL`), `gs://` is Google Cloud Storage through its S3-compatible XML
//! API with HMAC keys. Credentials and endpoints come from the usual `AWS_*` variables.

pub mod layout;
pub mod mirror;
pub mod store;
pub mod upload;
pub mod url;

pub use mirror::{Mirror, Synced};
pub use store::{ObjectsError, Store};
pub use upload::Uploaded;
pub use url::StoreUrl;
