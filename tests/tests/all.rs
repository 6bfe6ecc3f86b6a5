//! The one integration-test binary of the workspace (docs/architecture.md#testing): every suite is
//! a module of
//! `suite`, so the support code, the fakes and the real droid are built and linked once.

// Everything in this binary is test code, helpers included; clippy's `allow-unwrap-in-tests`
// only covers `#[test]` functions themselves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
