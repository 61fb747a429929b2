//! `weft keys create|list|revoke`: API keys from the command line, straight into the database a
//! server uses (the bootstrap: the first admin key is made here, or given as WEFT_ADMIN_KEY).

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};

#[derive(Args, Debug)]
pub struct KeysArgs {
    #[command(subcommand)]
    command: KeysCommand,
}

#[derive(Subcommand, Debug)]
enum KeysCommand {
    /// Make a key and print it (once: only its hash is stored). The key is the last line.
    Create {
        /// admin, user or readonly.
        #[arg(long, default_value = "admin")]
        role: String,
        /// A name to tell the key apart (default: cli-<role>-<time>).
        #[arg(long)]
        name: Option<String>,
        #[command(flatten)]
        db: DbArg,
    },
    /// List keys (never the keys themselves).
    List {
        #[command(flatten)]
        db: DbArg,
    },
    /// Revoke a key by id.
    Revoke {
        id: String,
        #[command(flatten)]
        db: DbArg,
    },
}

#[derive(Args, Debug)]
struct DbArg {
    /// The database `weft serve` uses (default $WEFT_HOME/weft.db).
    #[arg(long, env = "WEFT_DATABASE")]
    database: Option<String>,
}

/// The database URL: the one given, or `$WEFT_HOME/weft.db`.
pub fn database_url(given: Option<&str>) -> Result<String> {
    match given.filter(|u| !u.is_empty()) {
        Some(u) => Ok(u.to_string()),
        None => {
            let home = crate::store::weft_home()
                .context("no home folder for the database: set WEFT_HOME or HOME, or --database")?;
            Ok(home.join("weft.db").display().to_string())
        }
    }
}

pub fn run(a: KeysArgs) -> Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        match a.command {
            KeysCommand::Create { role, name, db } => {
                let storage = open(&db).await?;
                let name = name
                    .unwrap_or_else(|| format!("cli-{role}-{}", crate::server::new_id_suffix()));
                let (id, key) = crate::server::create_key(&storage, name.clone(), &role)
                    .await
                    .map_err(|e| anyhow::anyhow!(e.message))?;
                eprintln!(
                    "created {role} key {id} ({name}) in the {} database; it is shown only now:",
                    storage.backend()
                );
                println!("{key}");
                storage.close().await;
            }
            KeysCommand::List { db } => {
                let storage = open(&db).await?;
                for k in storage.list_keys().await? {
                    let state = if k.revoked_at.is_some() {
                        "revoked"
                    } else if k.expires_at.is_some_and(|t| t <= weft_storage::now()) {
                        "expired"
                    } else {
                        "active"
                    };
                    println!("{}\t{}\t{}\t{}…\t{state}", k.id, k.name, k.role, k.prefix);
                }
                storage.close().await;
            }
            KeysCommand::Revoke { id, db } => {
                let storage = open(&db).await?;
                match storage.revoke_key(&id).await {
                    Ok(k) => println!("revoked {} ({})", k.id, k.name),
                    Err(weft_storage::StorageError::NotFound(_)) => bail!("no key with id {id}"),
                    Err(e) => return Err(e.into()),
                }
                storage.close().await;
            }
        }
        Ok(())
    })
}

async fn open(db: &DbArg) -> Result<weft_storage::Storage> {
    let url = database_url(db.database.as_deref())?;
    Ok(weft_storage::Storage::open(&url).await?)
}
