//! Why a sandboxed process could not be started. The display text is what the model reads.

/// A sandbox that could not be set up for a call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SandboxError {
    /// The kernel lacks what confinement needs and the operator did not accept running unconfined.
    #[error(
        "Code execution is disabled: this system cannot confine model-started processes ({missing} \
         unavailable). An operator can accept running them unconfined with \
         AGW_SANDBOX_ALLOW_UNCONFINED=true (not recommended)."
    )]
    Unsupported {
        /// The unavailable mechanisms, e.g. `Landlock and seccomp`.
        missing: String,
    },
    /// Every per-call identity is in use; carries how many there are.
    #[error("Too many sandboxed processes are running ({0}); try again later.")]
    Busy(u32),
    /// A directory the child needs cannot be read by its unprivileged identity.
    #[error(
        "{path} is not readable by the sandbox identity (uid {uid}): it must be readable by others \
         (o+r, directories o+rx), and every parent directory searchable (o+x)"
    )]
    Unreadable {
        /// The directory (or a parent) that others cannot read or search.
        path: String,
        /// The identity the child would run as.
        uid: u32,
    },
    /// Creating the scratch directory, the ruleset or the filters failed.
    #[error("Cannot prepare the sandbox: {0}")]
    Setup(String),
}
