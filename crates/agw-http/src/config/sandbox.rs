//! `agw.sandbox.*`: limits and identity of model-started processes. What the kernel supports is
//! probed (`agw_tools::sandbox::probe`), not configured.

use agw_tools::sandbox::{Limits, SLOTS, SandboxConfig};

use super::source::Source;
use super::table::{
    AGW_SANDBOX_ALLOW_UNCONFINED, AGW_SANDBOX_CPU_SECONDS, AGW_SANDBOX_FILE_SIZE_MIB, AGW_SANDBOX_MAX_PROCESSES,
    AGW_SANDBOX_MEMORY_MIB, AGW_SANDBOX_UID_BASE,
};
use super::{ConfigError, value};

pub(super) fn load(src: &Source) -> Result<SandboxConfig, ConfigError> {
    Ok(SandboxConfig {
        limits: Limits {
            cpu_seconds: src.parse(&AGW_SANDBOX_CPU_SECONDS, value::whole)?,
            memory_mib: src.parse(&AGW_SANDBOX_MEMORY_MIB, value::whole)?,
            file_size_mib: src.parse(&AGW_SANDBOX_FILE_SIZE_MIB, value::whole)?,
            processes: src.parse(&AGW_SANDBOX_MAX_PROCESSES, value::whole)?,
        },
        allow_unconfined: src.parse(&AGW_SANDBOX_ALLOW_UNCONFINED, value::bool)?,
        uid_base: src.parse(&AGW_SANDBOX_UID_BASE, |s| {
            let base = s.trim().parse::<u32>().map_err(|e| e.to_string())?;
            // Root's ids, and ids whose range would wrap, can never be a sandbox identity.
            if base == 0 || base.checked_add(SLOTS).is_none() {
                return Err(format!("expected 1..={}", u32::MAX - SLOTS));
            }
            Ok(base)
        })?,
        ..SandboxConfig::default()
    })
}
