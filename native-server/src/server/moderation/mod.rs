//! Moderation: keyword and regex rules (stored in the database, `/api/v1/moderation/rules`)
//! checked against what users send (input) and what the model writes (output), on every chat
//! API. A match either blocks (400 `content_policy_violation`, or the stream's error event) or
//! flags (the request goes on; an audit row records the rule, the route and the key id, never
//! the text).
//!
//! Hooked in the generation layer every surface shares (`server/generate.rs`): input in
//! [`check_messages`] / [`check_text`], called where prompts are built; output in
//! [`output::OutputFilter`], which the event sink runs on each sequence's text before any
//! surface sees it. The request's rules come with its request context (`server/auth/context.rs`, through the [`Screened`] trait).
//!
//! Replicas: rules are re-read from the database every [`POLL`] (the settings' polling), so a
//! rule added on one replica applies on the others within that time; the replica that made
//! the change applies it at once.

mod input;
pub mod output;
pub mod rules;
mod state;

use std::collections::HashSet;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use serde_json::json;
use weft_storage::{NewAudit, Storage};

pub use self::input::{check_messages, check_text};
use self::rules::{Action, Rule, RuleSet};
use super::error::ApiError;
pub use state::ModerationState;

/// How often a replica re-reads the rules.
pub const POLL: Duration = Duration::from_secs(2);

/// The server's rules and the `moderation` setting.
pub struct Moderation {
    rules: RwLock<Arc<RuleSet>>,
    /// The `moderation` setting: `None` (unset) means on.
    enabled: RwLock<Option<bool>>,
    storage: Storage,
}

/// The request a check is made for: its rules and who made it, for a flag's audit row. The
/// request context (`server/auth/context.rs`) is what implements it, so the checks take the
/// request's context like metering does, while this module needs nothing from it.
pub trait Screened: Send + Sync {
    /// The request's rules, when moderation is on and there are some.
    fn screen(&self) -> Option<&Screen>;
    /// The key or user that made the request, once known.
    fn actor(&self) -> Option<String>;
    fn method(&self) -> &str;
    fn route(&self) -> &str;
    fn request_id(&self) -> &str;
}

/// One request's moderation: the rules in force when it arrived.
pub struct Screen {
    rules: Arc<RuleSet>,
    storage: Storage,
    /// Rules already flagged for this request, with the side (one audit row per rule and
    /// side, however many times a tool loop rebuilds the prompt or the output repeats it).
    flagged: Mutex<HashSet<(String, &'static str)>>,
    /// The runtime flags are written on (the output filter runs on the scheduler's thread).
    rt: tokio::runtime::Handle,
}

impl Moderation {
    pub fn new(storage: Storage) -> Self {
        Moderation {
            rules: RwLock::new(Arc::new(RuleSet::default())),
            enabled: RwLock::new(None),
            storage,
        }
    }

    /// The `moderation` setting (`None`: the default, on).
    pub fn set_enabled(&self, on: Option<bool>) {
        *self.enabled.write().unwrap_or_else(|p| p.into_inner()) = on;
    }

    /// A screen for a new request: `None` when moderation is off or there are no rules.
    pub fn screen(&self) -> Option<Screen> {
        if *self.enabled.read().unwrap_or_else(|p| p.into_inner()) == Some(false) {
            return None;
        }
        let rules = self.rules.read().unwrap_or_else(|p| p.into_inner()).clone();
        if rules.is_empty() {
            return None;
        }
        Some(Screen {
            rules,
            storage: self.storage.clone(),
            flagged: Mutex::new(HashSet::new()),
            rt: tokio::runtime::Handle::try_current().ok()?,
        })
    }

    /// Re-reads the rules; compiles them again only when they changed.
    pub async fn reload(&self) -> Result<(), ApiError> {
        let stored = self.storage.list_rules().await?;
        if self.rules.read().unwrap_or_else(|p| p.into_inner()).source == stored {
            return Ok(());
        }
        let set = Arc::new(RuleSet::new(stored));
        *self.rules.write().unwrap_or_else(|p| p.into_inner()) = set;
        Ok(())
    }

    /// Follows rules changed by other replicas.
    pub fn spawn_sync(self: Arc<Self>) {
        tokio::spawn(async move {
            loop {
                if let Err(e) = self.reload().await {
                    tracing::warn!(error = %e.message, "reloading moderation rules");
                }
                tokio::time::sleep(POLL).await;
            }
        });
    }
}

impl Screen {
    /// Acts on `hits`: flags are recorded, and the first block is the error returned.
    fn act(
        &self,
        ctx: &dyn Screened,
        hits: &[&Rule],
        applies_to: &'static str,
    ) -> Result<(), String> {
        for r in hits.iter().filter(|r| r.action == Action::Flag) {
            self.flag(ctx, r, applies_to);
        }
        match hits.iter().find(|r| r.action == Action::Block) {
            Some(r) => Err(format!(
                "the {applies_to} was blocked by moderation rule {}",
                r.id
            )),
            None => Ok(()),
        }
    }

    /// Writes the flag's audit row (once per rule and request), off the caller's thread.
    fn flag(&self, ctx: &dyn Screened, rule: &Rule, applies_to: &'static str) {
        let first = self
            .flagged
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert((rule.id.clone(), applies_to));
        if !first {
            return;
        }
        tracing::info!(rule = %rule.id, applies_to, "moderation flag");
        let row = NewAudit {
            actor: ctx.actor().unwrap_or_else(|| "unauthenticated".into()),
            method: ctx.method().to_string(),
            route: ctx.route().to_string(),
            // Not a response status: the row is written when the rule matches.
            status: 0,
            remote: None,
            details: Some(json!({
                "moderation": "flag",
                "rule": rule.id,
                "applies_to": applies_to,
                "request_id": ctx.request_id(),
            })),
        };
        let storage = self.storage.clone();
        self.rt.spawn(async move {
            if let Err(e) = storage.append_audit(row).await {
                tracing::error!(error = %e, "writing a moderation flag");
            }
        });
    }
}
