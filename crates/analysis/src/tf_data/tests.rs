//! Unit tests on small hand-built host planes.
