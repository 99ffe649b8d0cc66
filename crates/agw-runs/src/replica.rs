//! This replica among others: joining and leaving the cluster, and answering the requests other
//! replicas forward for the runs it holds.

use std::sync::{Arc, Weak};

use agw_cluster::{Cluster, ClusterConfig, ClusterError, ControlReply, ControlRequest};

use crate::RunError;
use crate::calls::{Caller, Control, reply};
use crate::node::Node;
use crate::principal::{Principal, may_access};
use crate::service::{Core, RunService};

impl RunService {
    /// Joins a cluster: connects to its Redis, takes this node's lease and serves control
    /// requests for the runs it owns. `config.node_id` gets a suffix of its own per call: a
    /// replica restarted under the same id must not look like the owner of the runs (and chat
    /// locks) its previous life left behind. Idempotent.
    pub async fn join_cluster(&self, mut config: ClusterConfig) -> Result<(), ClusterError> {
        if self.core.cluster.get().is_some() {
            return Ok(());
        }
        let incarnation = &agw_protocol::ids::new_run_id().replace('-', "")[..6];
        config.node_id = format!("{}.{incarnation}", config.node_id);
        let prefix = config.prefix.clone();
        let cluster = Cluster::connect(config).await?;
        let weak: Weak<Core> = Arc::downgrade(&self.core);
        cluster.serve_control(move |request| {
            let weak = weak.clone();
            async move {
                match weak.upgrade() {
                    Some(core) => answer_control(&RunService { core }, request).await,
                    None => reply(Err::<(), _>(RunError::Stopping)),
                }
            }
        });
        tracing::info!(node = %cluster.node_id(), %prefix, "joined the cluster");
        if self.core.cluster.set(Arc::new(Node { cluster })).is_err() {
            tracing::debug!("cluster joined twice; the second connection is dropped");
        }
        Ok(())
    }

    /// Leaves the cluster at shutdown: the lease is deleted at once (a stopped replica is not a
    /// lost one: its waiting runs can be adopted right away).
    pub async fn leave_cluster(&self) {
        if let Some(node) = self.core.cluster.get() {
            node.cluster.shutdown().await;
            tracing::info!(node = %node.id(), "left the cluster");
        }
    }
}

/// The caller a forwarded request acts for, or why it acts for nobody.
fn caller_of(core: &Core, request: &ControlRequest) -> Result<Option<Principal>, &'static str> {
    match &request.principal {
        // Callers are authenticated here: every local caller has a principal, so must this one.
        None if core.settings.callers_authenticated => Err("it names no caller while auth is on"),
        None => Ok(None),
        Some(value) => serde_json::from_value::<Caller>(value.clone())
            .ok()
            .and_then(Caller::principal)
            .map(Some)
            .ok_or("its caller does not decode"),
    }
}

/// The owner's side of [`forward`]: the same operation as a local request, with the same access
/// check against the run's owner, for the caller the signed request names. A refusal looks like
/// absence (not found, `unmatched`), as for local requests, and is logged.
async fn answer_control(service: &RunService, request: ControlRequest) -> ControlReply {
    let core = &service.core;
    let (run_id, kind) = (request.run_id.as_str(), request.kind);
    let principal = match caller_of(core, &request) {
        Ok(principal) => principal,
        Err(why) => {
            tracing::warn!(runId = %run_id, %kind, "forwarded request refused: {why}; answered as if the run did not exist");
            // Owners always have a non-blank subject: this caller may access nothing.
            Some(Principal { subject: String::new(), tenant: None, operator: false })
        }
    };
    let principal = principal.as_ref();
    if let Some(owner) = core.tracker.owner(run_id)
        && !may_access(principal, owner.as_ref())
    {
        tracing::warn!(
            runId = %run_id,
            %kind,
            "forwarded request refused: its caller may not act on the run; answered as if the run did not exist"
        );
    }
    match Control::decode(kind, run_id, request.body) {
        Err(error) => reply(Err::<(), _>(error)),
        Ok(Control::Interrupt) => {
            reply(match core.tracker.get(run_id).filter(|h| may_access(principal, h.owner.as_ref())) {
                Some(handle) => Ok(crate::control::interrupt_handle(&handle).await),
                None => Err(RunError::run_not_found(run_id)),
            })
        }
        Ok(Control::Steer(steer)) => reply(service.steer(steer, principal).await),
        Ok(Control::Submit(submit)) => reply(service.submit(submit, principal).await),
    }
}
