//! `server.*` and `agw.sse.*`: where and how the HTTP server listens and answers.

use std::net::IpAddr;
use std::time::Duration;

use super::source::Source;
use super::table::{
    AGW_SSE_HEARTBEAT_INTERVAL, SERVER_ADDRESS, SERVER_ALLOWED_HOSTS, SERVER_MAX_REQUEST_BYTES, SERVER_PORT,
    SERVER_SHUTDOWN_GRACE_MS,
};
use super::{ConfigError, value};
use crate::auth::AuthSettings;
use crate::hosts::AllowedHosts;

#[derive(Debug, Clone)]
pub struct ServerSettings {
    pub port: u16,
    pub address: IpAddr,
    /// `Host` / `:authority` values served; others get 403 (DNS rebinding).
    pub allowed_hosts: AllowedHosts,
    pub max_request_bytes: usize,
    /// On SIGTERM/SIGINT, how long in-flight runs may finish.
    pub shutdown_grace: Duration,
    /// Period of heartbeat frames on open SSE streams (zero: none).
    pub heartbeat_interval: Duration,
}

/// Auth on → every interface by default; auth off → loopback unless the operator sets an
/// address, and a non-loopback one needs the explicit `AGENT_AUTH_ENABLED=false`.
pub(super) fn load(src: &Source, auth: &AuthSettings) -> Result<ServerSettings, ConfigError> {
    let address = match src.parse_opt(&SERVER_ADDRESS, |s| s.parse::<IpAddr>().map_err(|e| e.to_string()))? {
        Some(addr) => addr,
        None if auth.enforced() => IpAddr::from([0, 0, 0, 0]),
        None => IpAddr::from([127, 0, 0, 1]),
    };
    if !address.is_loopback() && !auth.enforced() && auth.enabled != Some(false) {
        return Err(ConfigError::Invalid {
            property: SERVER_ADDRESS.property,
            env: SERVER_ADDRESS.env,
            message: format!(
                "{address} is not a loopback address and no auth key source is configured; configure agent.auth.local-public-key or agent.auth.jwks-uri, or set AGENT_AUTH_ENABLED=false to serve without auth"
            ),
        });
    }
    let hosts = src.parse_opt(&SERVER_ALLOWED_HOSTS, value::list)?;
    let allowed_hosts = AllowedHosts::new(hosts.as_deref(), address).map_err(|message| ConfigError::Invalid {
        property: SERVER_ALLOWED_HOSTS.property,
        env: SERVER_ALLOWED_HOSTS.env,
        message,
    })?;
    Ok(ServerSettings {
        port: src.parse(&SERVER_PORT, value::whole)?,
        address,
        allowed_hosts,
        max_request_bytes: src.parse(&SERVER_MAX_REQUEST_BYTES, value::whole)?,
        shutdown_grace: src.parse(&SERVER_SHUTDOWN_GRACE_MS, value::millis)?,
        heartbeat_interval: src.parse(&AGW_SSE_HEARTBEAT_INTERVAL, value::duration)?,
    })
}
