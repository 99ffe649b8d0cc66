//! `server.*` and `agw.sse.*`: where and how the HTTP server listens and answers.

use std::net::IpAddr;
use std::time::Duration;

use super::source::Source;
use super::table::{
    AGW_SSE_HEARTBEAT_INTERVAL, SERVER_ADDRESS, SERVER_ALLOWED_HOSTS, SERVER_BODY_READ_TIMEOUT,
    SERVER_HEADER_READ_TIMEOUT, SERVER_MAX_CONNECTIONS, SERVER_MAX_CONNECTIONS_PER_IP, SERVER_MAX_REQUEST_BYTES,
    SERVER_MAX_REQUESTS_PER_IP_PER_MINUTE, SERVER_MAX_TOKEN_BYTES, SERVER_PORT, SERVER_SHUTDOWN_GRACE_MS,
};
use super::{ConfigError, value};
use crate::auth::AuthSettings;
use crate::hosts::AllowedHosts;

/// `server.*` and `agw.sse.*`: where the server listens and how it treats clients.
#[derive(Debug, Clone)]
pub struct ServerSettings {
    /// TCP port listened on (`server.port`).
    pub port: u16,
    /// `server.address`; defaults to 0.0.0.0 when auth is enforced, else loopback.
    pub address: IpAddr,
    /// `Host` / `:authority` values served; others get 403 (DNS rebinding).
    pub allowed_hosts: AllowedHosts,
    /// Largest request body accepted, in bytes; larger ones get 413 before being read.
    pub max_request_bytes: usize,
    /// On SIGTERM/SIGINT, how long in-flight runs may finish.
    pub shutdown_grace: Duration,
    /// Period of heartbeat frames on open SSE streams (zero: none).
    pub heartbeat_interval: Duration,
    /// Limits against slow and greedy clients.
    pub limits: ConnectionLimits,
}

/// What one client may hold or send (issue 14: slowloris, slow bodies, connection floods).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// Time to send a request's headers; also the idle time between keep-alive requests.
    pub header_read_timeout: Duration,
    /// Time to send a whole request body (408 after it).
    pub body_read_timeout: Duration,
    /// Open connections at once (0 = unlimited).
    pub max_connections: usize,
    /// Open connections per client IP (0 = unlimited).
    pub max_connections_per_ip: usize,
    /// Requests per client IP per minute (0 = unlimited).
    pub max_requests_per_ip_per_minute: u32,
    /// Longest `Authorization` header accepted.
    pub max_token_bytes: usize,
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
    let allowed_hosts = AllowedHosts::new(hosts.as_deref(), address).map_err(|e| ConfigError::Invalid {
        property: SERVER_ALLOWED_HOSTS.property,
        env: SERVER_ALLOWED_HOSTS.env,
        message: e.to_string(),
    })?;
    Ok(ServerSettings {
        port: src.parse(&SERVER_PORT, value::whole)?,
        address,
        allowed_hosts,
        max_request_bytes: src.parse(&SERVER_MAX_REQUEST_BYTES, value::whole)?,
        shutdown_grace: src.parse(&SERVER_SHUTDOWN_GRACE_MS, value::millis)?,
        heartbeat_interval: src.parse(&AGW_SSE_HEARTBEAT_INTERVAL, value::duration)?,
        limits: ConnectionLimits {
            header_read_timeout: positive(src, &SERVER_HEADER_READ_TIMEOUT)?,
            body_read_timeout: positive(src, &SERVER_BODY_READ_TIMEOUT)?,
            max_connections: src.parse(&SERVER_MAX_CONNECTIONS, value::whole)?,
            // Per-client limits protect a shared server; on loopback the one client is the user.
            max_connections_per_ip: src
                .parse_opt(&SERVER_MAX_CONNECTIONS_PER_IP, value::whole)?
                .unwrap_or(if address.is_loopback() { 0 } else { 256 }),
            max_requests_per_ip_per_minute: src
                .parse_opt(&SERVER_MAX_REQUESTS_PER_IP_PER_MINUTE, value::whole)?
                .unwrap_or(if address.is_loopback() { 0 } else { 1200 }),
            max_token_bytes: src.parse(&SERVER_MAX_TOKEN_BYTES, value::whole)?,
        },
    })
}

/// A duration that must be above zero (a zero timeout would refuse every request).
fn positive(src: &Source, spec: &super::table::SettingSpec) -> Result<Duration, ConfigError> {
    let duration = src.parse(spec, value::duration)?;
    if duration.is_zero() {
        return Err(ConfigError::Invalid {
            property: spec.property,
            env: spec.env,
            message: "must be above zero".into(),
        });
    }
    Ok(duration)
}
