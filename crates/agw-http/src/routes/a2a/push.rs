//! A2A push notifications (issue 38; `docs/protocols.md` §7): a client registers webhooks for a
//! task, and every change of the task's state is POSTed to each as a `StreamResponse` — a
//! `statusUpdate` per state (`WORKING`, `INPUT_REQUIRED`, …), then the whole `task` at its end.
//!
//! A webhook URL comes from a client, so it crosses a trust boundary: only `http`/`https`, no
//! credentials in it, at most [`MAX_PER_TASK`] per task, and — unless
//! `agw.a2a.push.allow-private-networks` — every address its host resolves to must be public
//! (no loopback, private, link-local or metadata addresses). The address checked is the one
//! connected to (no second lookup to rebind), redirects are not followed, and each POST has a
//! timeout. Deliveries of one task go one after another; a failure is logged, not retried.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use dashmap::DashMap;
use serde_json::{Value, json};

use super::{RpcError, code, prime};
use crate::auth::Principal;
use crate::state::AppState;

/// Most webhooks one task may have.
pub const MAX_PER_TASK: usize = 5;
/// Longest webhook URL accepted.
const MAX_URL_BYTES: usize = 2048;
/// One delivery's whole time.
const DELIVERY_TIMEOUT: Duration = Duration::from_secs(10);

/// One webhook of a task (`TaskPushNotificationConfig`).
#[derive(Debug, Clone)]
pub(super) struct PushConfig {
    id: String,
    task_id: String,
    url: reqwest::Url,
    /// Sent as `X-A2A-Notification-Token`, so the receiver knows the notification is for it.
    token: Option<String>,
    /// `authentication {scheme, credentials}`: sent as `Authorization: <scheme> <credentials>`.
    authentication: Option<(String, String)>,
}

impl PushConfig {
    /// Reads a `TaskPushNotificationConfig` for `task_id` (its own `taskId`, when given, must
    /// name the same task).
    pub(super) fn parse(value: &Value, task_id: &str) -> Result<Self, RpcError> {
        let invalid = |m: String| RpcError::new(code::INVALID_PARAMS, m);
        let text = |key: &str| value.get(key).and_then(Value::as_str).map(str::trim).filter(|s| !s.is_empty());
        if text("taskId").is_some_and(|t| t != task_id) {
            return Err(invalid("the config's taskId names another task".into()));
        }
        let raw = text("url").ok_or_else(|| invalid("a push config needs a url".into()))?;
        if raw.len() > MAX_URL_BYTES {
            return Err(invalid(format!("the push url is longer than {MAX_URL_BYTES} bytes")));
        }
        let url = reqwest::Url::parse(raw).map_err(|e| invalid(format!("the push url does not parse: {e}")))?;
        if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
            return Err(invalid("the push url must be an http or https URL with a host".into()));
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(invalid("the push url must not hold credentials: use authentication".into()));
        }
        let authentication = value.get("authentication").and_then(|a| {
            let scheme = a.get("scheme").and_then(Value::as_str).map(str::trim).filter(|s| !s.is_empty())?;
            let credentials = a.get("credentials").and_then(Value::as_str).unwrap_or_default();
            Some((scheme.to_owned(), credentials.to_owned()))
        });
        if authentication.as_ref().is_some_and(|(s, c)| s.contains(['\r', '\n']) || c.contains(['\r', '\n'])) {
            return Err(invalid("the push authentication must be one line".into()));
        }
        Ok(Self {
            id: text("id").map_or_else(agw_protocol::ids::new_run_id, str::to_owned),
            task_id: task_id.to_owned(),
            url,
            token: text("token").map(str::to_owned),
            authentication,
        })
    }

    /// The config for the task `task_id` (one registered with `SendMessage`, before its task had
    /// an id).
    pub(super) fn for_task(mut self, task_id: &str) -> Self {
        task_id.clone_into(&mut self.task_id);
        self
    }

    /// The config as the protocol shows it (credentials left out).
    fn to_json(&self) -> Value {
        let mut config = json!({"id": self.id, "taskId": self.task_id, "url": self.url.as_str()});
        if let Some(token) = &self.token {
            config["token"] = json!(token);
        }
        if let Some((scheme, _)) = &self.authentication {
            config["authentication"] = json!({"scheme": scheme});
        }
        config
    }
}

/// The webhooks of every task, and whether a task is watched for them.
#[derive(Default)]
pub(super) struct PushStore {
    tasks: DashMap<String, Vec<PushConfig>>,
}

/// This server's store (made on first use).
fn store(state: &AppState) -> Arc<PushStore> {
    let slot = state.a2a_push.get_or_init(|| Arc::new(PushStore::default()) as Arc<dyn std::any::Any + Send + Sync>);
    slot.clone().downcast::<PushStore>().unwrap_or_default()
}

fn enabled(state: &AppState) -> Result<(), RpcError> {
    if state.settings.a2a_push.enabled {
        Ok(())
    } else {
        Err(RpcError::new(code::PUSH_NOT_SUPPORTED, "this agent does not send push notifications"))
    }
}

/// The task the params name, when the caller may see it here.
fn visible_task(state: &AppState, params: &Value, principal: Option<&Principal>) -> Result<String, RpcError> {
    let task_id = params
        .get("taskId")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .ok_or_else(|| RpcError::new(code::INVALID_PARAMS, "params.taskId is required"))?;
    match state.runs.local_run(task_id, principal) {
        Some(_) => Ok(task_id.to_owned()),
        None => Err(RpcError::new(code::TASK_NOT_FOUND, format!("no task {task_id}"))),
    }
}

/// `CreateTaskPushNotificationConfig`: registers (or replaces, by id) a webhook of a task.
pub(super) async fn create(state: &AppState, params: &Value, principal: Option<&Principal>) -> Result<Value, RpcError> {
    enabled(state)?;
    let task_id = visible_task(state, params, principal)?;
    let config = PushConfig::parse(params, &task_id)?;
    register(state, config, principal).await
}

/// Whether pushes are on and the config's URL may be called.
pub(super) async fn check(state: &AppState, config: &PushConfig) -> Result<(), RpcError> {
    enabled(state)?;
    address(&config.url, state.settings.a2a_push.allow_private_networks)
        .await
        .map(|_| ())
        .map_err(|e| RpcError::new(code::INVALID_PARAMS, format!("the push url is refused: {e}")))
}

/// Registers a config and watches its task (also for `SendMessage`'s
/// `configuration.taskPushNotificationConfig`).
pub(super) async fn register(
    state: &AppState,
    config: PushConfig,
    principal: Option<&Principal>,
) -> Result<Value, RpcError> {
    check(state, &config).await?;
    let shown = config.to_json();
    let push = store(state);
    let watch = {
        let mut configs = push.tasks.entry(config.task_id.clone()).or_default();
        let first = configs.is_empty();
        configs.retain(|c| c.id != config.id);
        if configs.len() >= MAX_PER_TASK {
            return Err(RpcError::new(code::INVALID_PARAMS, format!("a task has at most {MAX_PER_TASK} push configs")));
        }
        configs.push(config.clone());
        first
    };
    if watch {
        let (state, principal) = (state.clone(), principal.cloned());
        tokio::spawn(async move { watch_task(state, config.task_id, principal).await });
    }
    Ok(shown)
}

/// `GetTaskPushNotificationConfig`.
pub(super) fn get(state: &AppState, params: &Value, principal: Option<&Principal>) -> Result<Value, RpcError> {
    enabled(state)?;
    let task_id = visible_task(state, params, principal)?;
    let id = params.get("id").and_then(Value::as_str).unwrap_or_default();
    store(state)
        .tasks
        .get(&task_id)
        .and_then(|configs| configs.iter().find(|c| c.id == id).map(PushConfig::to_json))
        .ok_or_else(|| RpcError::new(code::TASK_NOT_FOUND, format!("task {task_id} has no push config {id:?}")))
}

/// `ListTaskPushNotificationConfigs` (at most [`MAX_PER_TASK`]: one page).
pub(super) fn list(state: &AppState, params: &Value, principal: Option<&Principal>) -> Result<Value, RpcError> {
    enabled(state)?;
    let task_id = visible_task(state, params, principal)?;
    let configs: Vec<Value> =
        store(state).tasks.get(&task_id).map(|c| c.iter().map(PushConfig::to_json).collect()).unwrap_or_default();
    Ok(json!({"configs": configs, "nextPageToken": ""}))
}

/// `DeleteTaskPushNotificationConfig`.
pub(super) fn delete(state: &AppState, params: &Value, principal: Option<&Principal>) -> Result<Value, RpcError> {
    enabled(state)?;
    let task_id = visible_task(state, params, principal)?;
    let id = params.get("id").and_then(Value::as_str).unwrap_or_default();
    if let Some(mut configs) = store(state).tasks.get_mut(&task_id) {
        configs.retain(|c| c.id != id);
    }
    Ok(json!({}))
}

/// Follows the task and POSTs each state change to its webhooks, then the task at its end; the
/// task's configs go with it.
async fn watch_task(state: AppState, task_id: String, principal: Option<Principal>) {
    let push = store(&state);
    let allow_private = state.settings.a2a_push.allow_private_networks;
    let Ok((mut mapper, after, mut events)) = prime(&state, &task_id, principal.as_ref(), None).await else {
        push.tasks.remove(&task_id);
        return;
    };
    let mut sent = None;
    let mut pending: Vec<Arc<agw_protocol::Event>> = after;
    loop {
        let mut out = Vec::new();
        for event in pending.drain(..) {
            mapper.map(&event, &mut out);
        }
        for update in out.iter().filter(|u| u.get("statusUpdate").is_some()) {
            let state_now = update["statusUpdate"]["status"]["state"].clone();
            // The end goes out as the whole task, below.
            let terminal = ["TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED", "TASK_STATE_REJECTED"]
                .iter()
                .any(|t| state_now == *t);
            if sent.as_ref() != Some(&state_now) && !terminal {
                deliver_all(&push, &task_id, update, allow_private).await;
                sent = Some(state_now);
            }
        }
        if mapper.is_finished() {
            deliver_all(&push, &task_id, &json!({"task": mapper.task()}), allow_private).await;
            break;
        }
        match futures::StreamExt::next(&mut events).await {
            Some(batch) => pending = batch,
            None => break,
        }
    }
    push.tasks.remove(&task_id);
}

async fn deliver_all(push: &PushStore, task_id: &str, body: &Value, allow_private: bool) {
    let configs = push.tasks.get(task_id).map(|c| c.clone()).unwrap_or_default();
    for config in configs {
        if let Err(e) = deliver(&config, body, allow_private).await {
            tracing::warn!(taskId = %task_id, configId = %config.id, error = %e, "A2A push notification not delivered");
        }
    }
}

/// One POST of `body` to a webhook, to the address checked (see the module docs).
async fn deliver(config: &PushConfig, body: &Value, allow_private: bool) -> Result<(), String> {
    let addr = address(&config.url, allow_private).await?;
    let host = config.url.host_str().unwrap_or_default().to_owned();
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(DELIVERY_TIMEOUT)
        .connect_timeout(Duration::from_secs(5))
        .resolve(&host, addr)
        .build()
        .map_err(|e| e.to_string())?;
    let mut request = client.post(config.url.clone()).json(body);
    if let Some(token) = &config.token {
        request = request.header("X-A2A-Notification-Token", token);
    }
    if let Some((scheme, credentials)) = &config.authentication {
        request = request.header(http::header::AUTHORIZATION, format!("{scheme} {credentials}"));
    }
    let response = request.send().await.map_err(|e| e.to_string())?;
    if !response.status().is_success() {
        return Err(format!("the webhook answered {}", response.status()));
    }
    Ok(())
}

/// The address to connect to for `url`: the first its host resolves to, once every address is
/// allowed (public, unless `allow_private`).
async fn address(url: &reqwest::Url, allow_private: bool) -> Result<SocketAddr, String> {
    let host = url.host_str().ok_or("no host")?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let port = url.port_or_known_default().ok_or("no port")?;
    let found: Vec<SocketAddr> = tokio::time::timeout(Duration::from_secs(5), tokio::net::lookup_host((host, port)))
        .await
        .map_err(|_| "the host did not resolve in time".to_owned())?
        .map_err(|e| format!("the host does not resolve: {e}"))?
        .collect();
    if let Some(private) = found.iter().find(|a| !allow_private && !is_public(a.ip())) {
        return Err(format!("{host} resolves to {}, which is not a public address", private.ip()));
    }
    found.first().copied().ok_or_else(|| format!("{host} resolves to no address"))
}

/// Whether `ip` is a public unicast address.
fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, ..] = v4.octets();
            !(v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_broadcast()
                || v4.is_documentation()
                || v4.is_unspecified()
                || v4.is_multicast()
                || a == 0
                // Shared address space (carrier-grade NAT), benchmarking, reserved.
                || (a == 100 && (64..128).contains(&b))
                || (a == 198 && (18..20).contains(&b))
                || a >= 240)
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_public(IpAddr::V4(v4));
            }
            let first = v6.segments()[0];
            !(v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                // Unique local (fc00::/7) and link-local (fe80::/10).
                || (first & 0xfe00) == 0xfc00
                || (first & 0xffc0) == 0xfe80)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_public_addresses_are_public() {
        for private in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "::1",
            "fe80::1",
            "fd00::1",
            "::ffff:127.0.0.1",
            "224.0.0.1",
            "255.255.255.255",
        ] {
            assert!(!is_public(private.parse().unwrap()), "{private}");
        }
        for public in ["1.1.1.1", "8.8.8.8", "2606:4700::1111", "::ffff:1.1.1.1"] {
            assert!(is_public(public.parse().unwrap()), "{public}");
        }
    }

    #[test]
    fn a_config_is_checked_before_anything_is_stored() {
        let parse = |v: Value| PushConfig::parse(&v, "t1").map(|c| c.to_json());
        let ok = parse(json!({"url": "https://hooks.example/a2a", "token": "tok", "authentication": {"scheme": "Bearer", "credentials": "secret"}})).unwrap();
        assert_eq!(ok["taskId"], "t1");
        assert_eq!(ok["authentication"], json!({"scheme": "Bearer"}), "credentials are not shown back");
        for bad in [
            json!({}),
            json!({"url": "ftp://x/y"}),
            json!({"url": "https://user:pw@x/y"}),
            json!({"url": "https://x/y", "taskId": "other"}),
            json!({"url": "https://x/y", "authentication": {"scheme": "Bearer\r\nX-Evil: 1", "credentials": "c"}}),
        ] {
            assert!(parse(bad.clone()).is_err(), "{bad}");
        }
    }

    #[tokio::test]
    async fn a_url_that_resolves_to_a_private_address_is_refused_unless_allowed() {
        let url = reqwest::Url::parse("http://127.0.0.1:9/hook").unwrap();
        assert!(address(&url, false).await.unwrap_err().contains("not a public address"));
        assert_eq!(address(&url, true).await.unwrap().port(), 9);
    }
}
