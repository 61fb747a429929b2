//! Shared helpers for the cross-crate integration tests in `tests/tests/`.
