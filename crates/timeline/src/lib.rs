//! The trace viewer's level-of-detail index (see `DESIGN` in the crate's README-to-be).
