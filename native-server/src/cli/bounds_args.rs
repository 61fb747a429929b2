//! `weft serve` flags for the bounds on what clients may make the server do: files per
//! upload, and where model pulls may go (see `store::pull_policy`).

use clap::Args;

use crate::store::PullPolicy;

#[derive(Args, Debug, Clone)]
pub struct BoundsArgs {
    /// Most files in one upload request.
    #[arg(long, default_value_t = crate::server::uploads::UploadConfig::DEFAULT_MAX_FILES)]
    pub upload_max_files: usize,
    /// Pages of a scanned PDF (no text layer) rendered to images when a vision model is
    /// served; later pages are left out and the upload says so.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=256))]
    pub pdf_max_pages: u32,
    /// Let pulls reach private, loopback and link-local addresses (this machine and its
    /// network). Without it such pulls fail as unreachable.
    #[arg(long)]
    pub pull_allow_private: bool,
    /// A host pulls may reach whatever address it has (repeatable; a name or an IP).
    #[arg(long = "pull-allow-host", value_name = "HOST")]
    pub pull_allow_hosts: Vec<String>,
    /// A host (and its subdomains) a pull may be redirected to over https, besides the same
    /// scheme, host and port (repeatable; `*` for any). Default: huggingface.co and hf.co.
    #[arg(long = "pull-redirect-host", value_name = "HOST")]
    pub pull_redirect_hosts: Vec<String>,
}

impl BoundsArgs {
    pub fn pull_policy(&self) -> PullPolicy {
        let mut p = PullPolicy::strict();
        p.allow_private = self.pull_allow_private;
        p.allow_hosts.clone_from(&self.pull_allow_hosts);
        if !self.pull_redirect_hosts.is_empty() {
            p.redirect_hosts.clone_from(&self.pull_redirect_hosts);
        }
        p
    }
}

/// Makes `WEFT_HOME` (created if missing) readable by this user only: it holds the database,
/// uploads, workspaces and models.
pub fn private_home() {
    let Some(home) = crate::store::weft_home() else {
        return;
    };
    let made =
        weft_storage::create_private_dir(&home).and_then(|()| weft_storage::restrict_dir(&home));
    if let Err(e) = made {
        tracing::warn!(error = %e, "making WEFT_HOME private (0700)");
    }
}
