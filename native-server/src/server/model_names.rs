//! The catalog's saved names (created names, aliases, overrides on file names) kept in the
//! database, so replicas on one database share them and they survive a restart whatever the
//! models directory.
//!
//! The catalog stays the in-memory truth every request reads; this module keeps it and the
//! `model_aliases` table in step, under one lock:
//!
//! - **push**: what the catalog saves now, compared with what it saved at the last sync; the
//!   difference (rows put, names removed) is written. Handlers that change names push at once,
//!   inside [`change`], so a name made by `/api/create` is stored before the reply, and a
//!   database error is the client's error. Changes made elsewhere (a pull naming its file) are
//!   pushed by the poll.
//! - **pull**: the whole table (it is small) is read every [`POLL`]; when it differs from the
//!   last read it replaces the catalog's saved part. Pulling is skipped while the catalog has
//!   changes not pushed yet, so an unpushed change is never overwritten.
//!
//! The same polled mechanism as the settings (not `LISTEN/NOTIFY`), so both backends behave
//! alike: another replica sees a change within one poll.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use weft_storage::{ModelAlias, Storage, StorageError};

use super::clock::POLL;
use super::error::ApiError;
use crate::registry::{Entry, Origin, Overrides, Registry, Target};

/// Keeps the catalog's saved names (in `registry`) and the database's table in step.
pub struct NameSync {
    registry: Arc<Registry>,
    storage: Storage,
    /// What the last sync saw.
    synced: tokio::sync::Mutex<Synced>,
}

#[derive(Default)]
struct Synced {
    /// The catalog's saved part after the last push or pull.
    local: BTreeMap<String, Entry>,
    /// The table as last read (`None`: not read yet).
    rows: Option<Vec<ModelAlias>>,
}

fn origin_str(o: Origin) -> &'static str {
    match o {
        Origin::Created => "created",
        Origin::CommandLine => "command_line",
        Origin::Directory => "directory",
    }
}

fn to_row(name: &str, e: &Entry) -> ModelAlias {
    let (kind, target) = match &e.target {
        Target::File(p) => ("file", p.display().to_string()),
        Target::Alias(n) => ("alias", n.clone()),
    };
    ModelAlias {
        name: name.to_string(),
        target_kind: kind.into(),
        target,
        overrides: serde_json::to_string(&e.overrides).unwrap_or_else(|_| "{}".into()),
        origin: origin_str(e.origin).into(),
        updated_at: 0,
    }
}

/// The entry a row stands for; `None` (logged) for a row this build cannot read.
fn from_row(r: &ModelAlias) -> Option<Entry> {
    let target = match r.target_kind.as_str() {
        "file" => Target::File(PathBuf::from(&r.target)),
        "alias" => Target::Alias(r.target.clone()),
        _ => None?,
    };
    let origin = match r.origin.as_str() {
        "created" => Origin::Created,
        "command_line" => Origin::CommandLine,
        "directory" => Origin::Directory,
        _ => None?,
    };
    let overrides: Overrides = match serde_json::from_str(&r.overrides) {
        Ok(o) => o,
        Err(e) => {
            tracing::warn!(name = %r.name, error = %e, "stored model name has bad overrides; skipped");
            return None;
        }
    };
    Some(Entry {
        target,
        overrides,
        origin,
    })
}

/// Switches the catalog to the database: imports the models directory's names file once
/// (names already stored win; the file is renamed `weft-models.json.imported`), loads what
/// is stored, and starts the poll.
impl NameSync {
    pub fn new(registry: Arc<Registry>, storage: Storage) -> Self {
        NameSync {
            registry,
            storage,
            synced: Default::default(),
        }
    }
}

pub async fn start(st: &Arc<NameSync>) -> Result<(), ApiError> {
    let (file, local) = st.registry.with_catalog(|c| {
        c.use_database();
        (c.store_file(), c.persisted())
    });
    if let Some(file) = file.filter(|f| f.is_file()) {
        let rows: Vec<ModelAlias> = local.iter().map(|(n, e)| to_row(n, e)).collect();
        let added = st.storage.import_model_aliases(&rows).await?;
        let done = file.with_extension("json.imported");
        match std::fs::rename(&file, &done) {
            Ok(()) => {
                tracing::info!(file = %file.display(), added, "model names imported into the database")
            }
            Err(e) => {
                tracing::warn!(file = %file.display(), error = %e, "model names imported, but the file could not be renamed: it will be imported again at the next start")
            }
        }
    }
    {
        let mut g = st.synced.lock().await;
        g.local = local;
        pull(st, &mut g).await?;
    }
    let st = st.clone();
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(POLL).await;
            let mut g = st.synced.lock().await;
            if let Err(e) = push(&st, &mut g).await {
                tracing::warn!(error = %e, "storing model names");
            } else if let Err(e) = pull(&st, &mut g).await {
                tracing::warn!(error = %e, "reading model names");
            }
        }
    });
    Ok(())
}

/// Runs `f` (a change to the catalog's names) and stores what it changed before returning.
pub async fn change<T, E: Into<ApiError>>(
    st: &NameSync,
    f: impl FnOnce() -> Result<T, E>,
) -> Result<T, ApiError> {
    let mut g = st.synced.lock().await;
    let out = f().map_err(Into::into);
    push(st, &mut g).await.map_err(|e| {
        ApiError::internal(format!(
            "the model names changed on this server but could not be stored (retried every {} s): {e}",
            POLL.as_secs()
        ))
    })?;
    out
}

/// Writes the catalog's saved changes since the last sync.
async fn push(st: &NameSync, g: &mut Synced) -> Result<(), StorageError> {
    let now = st.registry.with_catalog(|c| c.persisted());
    if now == g.local {
        return Ok(());
    }
    let put: Vec<ModelAlias> = now
        .iter()
        .filter(|(n, e)| g.local.get(*n) != Some(*e))
        .map(|(n, e)| to_row(n, e))
        .collect();
    let remove: Vec<String> = g
        .local
        .keys()
        .filter(|n| !now.contains_key(*n))
        .cloned()
        .collect();
    st.storage.write_model_aliases(&put, &remove).await?;
    g.local = now;
    Ok(())
}

/// Reads the table and, when it changed, makes it the catalog's saved part.
async fn pull(st: &NameSync, g: &mut Synced) -> Result<(), StorageError> {
    let rows = st.storage.model_aliases().await?;
    if g.rows.as_ref() == Some(&rows) {
        return Ok(());
    }
    let stored: BTreeMap<String, Entry> = rows
        .iter()
        .filter_map(|r| Some((r.name.clone(), from_row(r)?)))
        .collect();
    let applied = st.registry.with_catalog(|c| {
        // A change made since the last sync and not pushed yet (by code outside `change`)
        // would be lost: leave the table for the next poll, which pushes first.
        (c.persisted() == g.local).then(|| {
            c.replace_persisted(stored);
            c.persisted()
        })
    });
    if let Some(local) = applied {
        g.local = local;
        g.rows = Some(rows);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_round_trip_entries() {
        let mut parameters = serde_json::Map::new();
        parameters.insert("temperature".into(), 0.5.into());
        for e in [
            Entry {
                target: Target::Alias("smol".into()),
                overrides: Overrides::default(),
                origin: Origin::Created,
            },
            Entry {
                target: Target::File("/models/a.gguf".into()),
                overrides: Overrides {
                    system: Some("be brief".into()),
                    template: None,
                    parameters,
                },
                origin: Origin::Directory,
            },
        ] {
            assert_eq!(from_row(&to_row("n", &e)), Some(e));
        }
        let mut bad = to_row(
            "n",
            &Entry {
                target: Target::Alias("x".into()),
                overrides: Overrides::default(),
                origin: Origin::Created,
            },
        );
        bad.origin = "elsewhere".into();
        assert_eq!(from_row(&bad), None);
    }
}
