//! The deterministic mock tools (docs/contract/tools-skills-viewports.md §4.8–§4.14): equal arguments give equal
//! results, drawn from [`super::java_random::JavaRandom`] in the reference's exact order.

pub(crate) mod image;
pub(crate) mod logistics;
pub(crate) mod messages;
pub(crate) mod ops_runbook;
pub(crate) mod sensitive;
pub(crate) mod todo;
pub(crate) mod transport;
pub(crate) mod weather;

/// The tag every random mock result carries (Chinese variant: "idempotent random data").
const MOCK_TAG_ZH: &str = "幂等随机数据";
const MOCK_TAG_EN: &str = "idempotent-random-json";
