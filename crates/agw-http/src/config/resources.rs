//! Agent, tool, viewport, skill and data directories, their rescans, and the bundled demo set.

use std::path::PathBuf;
use std::time::Duration;

use super::source::Source;
use super::table::{
    AGENT_A2A_EXTERNAL_DIR, AGENT_CAPABILITY_REFRESH_INTERVAL_MS, AGENT_DATA_EXTERNAL_DIR, AGENT_EXTERNAL_DIR,
    AGENT_MCP_EXTERNAL_DIR, AGENT_REFRESH_INTERVAL_MS, AGENT_SKILL_EXTERNAL_DIR, AGENT_SKILL_MAX_PROMPT_CHARS,
    AGENT_SKILL_REFRESH_INTERVAL_MS, AGENT_TOOLS_EXTERNAL_DIR, AGENT_VIEWPORT_EXTERNAL_DIR,
    AGENT_VIEWPORT_REFRESH_INTERVAL_MS, AGW_RESOURCES_SYNC_BUNDLED, SettingSpec,
};
use super::{ConfigError, value};

/// Where the catalogs are loaded from, how often they are rescanned, and the data directory.
#[derive(Debug, Clone)]
pub struct ResourceSettings {
    /// `agent.catalog.*`: agent definition files.
    pub agents: CatalogDir,
    /// `agent.capability.*`: tool definition files.
    pub tools: CatalogDir,
    /// `agent.viewport.*`: viewport files.
    pub viewports: CatalogDir,
    /// Also the root `_skill_run_script_` runs scripts from.
    pub skills: CatalogDir,
    /// Served by `GET /api/ap/data/{filename}`; neither synced nor watched.
    pub data_dir: PathBuf,
    /// Skill instructions longer than this are truncated in prompts (0 = unlimited).
    pub skill_max_prompt_chars: usize,
    /// Copy the bundled demo resources into the configured directories (never overwriting).
    pub sync_bundled: bool,
    /// MCP server declarations (`None`: no MCP servers); read at start.
    pub mcp_dir: Option<PathBuf>,
    /// Remote A2A agent declarations (`None`: none); read at start and on change.
    pub a2a_dir: Option<PathBuf>,
}

/// A watched catalog directory.
#[derive(Debug, Clone)]
pub struct CatalogDir {
    /// `None`: the bundled set, which never changes.
    pub dir: Option<PathBuf>,
    /// Periodic rescan, a safety net behind file watching.
    pub refresh: Duration,
}

pub(super) fn load(src: &Source) -> Result<ResourceSettings, ConfigError> {
    let catalog = |dir: &SettingSpec, refresh: &SettingSpec| -> Result<CatalogDir, ConfigError> {
        Ok(CatalogDir { dir: src.parse_opt(dir, value::path)?, refresh: src.parse(refresh, value::millis)? })
    };
    Ok(ResourceSettings {
        agents: catalog(&AGENT_EXTERNAL_DIR, &AGENT_REFRESH_INTERVAL_MS)?,
        tools: catalog(&AGENT_TOOLS_EXTERNAL_DIR, &AGENT_CAPABILITY_REFRESH_INTERVAL_MS)?,
        viewports: catalog(&AGENT_VIEWPORT_EXTERNAL_DIR, &AGENT_VIEWPORT_REFRESH_INTERVAL_MS)?,
        skills: catalog(&AGENT_SKILL_EXTERNAL_DIR, &AGENT_SKILL_REFRESH_INTERVAL_MS)?,
        data_dir: src.parse(&AGENT_DATA_EXTERNAL_DIR, value::path)?,
        // Negative means unlimited like 0 (docs/contract/config.md §2).
        skill_max_prompt_chars: src.parse(&AGENT_SKILL_MAX_PROMPT_CHARS, value::whole::<i64>)?.max(0) as usize,
        sync_bundled: src.parse(&AGW_RESOURCES_SYNC_BUNDLED, value::bool)?,
        mcp_dir: src.parse_opt(&AGENT_MCP_EXTERNAL_DIR, value::path)?,
        a2a_dir: src.parse_opt(&AGENT_A2A_EXTERNAL_DIR, value::path)?,
    })
}
