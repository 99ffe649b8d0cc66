//! Shared helpers for agw-llm's integration tests (the test kit's, so embedders test the same way).
#![allow(unused_imports)] // each test binary uses a different subset

pub use agw_testkit::drive::*;
