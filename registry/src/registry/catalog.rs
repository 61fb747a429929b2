//! The models a server knows by name: files given with `--model`, files found in
//! `--models-dir`, and the names clients made (`/api/create`, `/api/copy`, aliases), with the
//! overrides each carries (system prompt, chat template, default parameters).
//!
//! Names clients make are kept in `weft-models.json` in the models directory, so they outlive
//! a restart; with no models directory they live as long as the process. A server keeps them
//! in its database instead ([`Catalog::use_database`]; `server::model_names` writes and
//! re-reads them), importing the file once: the offline commands (`weft cp`, `weft rm`) still
//! work on the file.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::error::RegistryError;
use super::facts::Facts;
use super::names;
use super::scope::Scope;

/// A file as messages to clients name it: its file name, never its folder (no absolute
/// path leaves the server).
pub fn shown(path: &Path) -> String {
    path.file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_else(|| "the model file".into())
}

/// `msg` (an error from reading `path`, which may quote it or files beside it) with the
/// folder holding `path` taken out, so it names files relative to the models' folder.
pub fn scrub(msg: &str, path: &Path) -> String {
    match path.parent().map(|d| d.display().to_string()) {
        Some(d) if !d.is_empty() => msg.replace(&format!("{d}/"), "").replace(&d, "."),
        _ => msg.to_string(),
    }
}

/// File name of the persisted names, inside the models directory.
pub const STORE_FILE: &str = "weft-models.json";

/// What a name adds on top of its model file.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Overrides {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<String>,
    /// A Jinja chat template replacing the file's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<String>,
    /// Default request options (Ollama `options` names: `temperature`, `stop`, `num_predict`…).
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub parameters: Map<String, Value>,
}

impl Overrides {
    /// `self` with `top`'s values winning where it has them.
    pub fn under(&self, top: &Overrides) -> Overrides {
        let mut parameters = self.parameters.clone();
        parameters.extend(top.parameters.clone());
        Overrides {
            system: top.system.clone().or_else(|| self.system.clone()),
            template: top.template.clone().or_else(|| self.template.clone()),
            parameters,
        }
    }
}

/// Where a name leads.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Target {
    /// A GGUF file.
    File(PathBuf),
    /// Another name (an alias follows its target's changes).
    Alias(String),
}

/// How a name came to be known.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    /// `--model` on the command line.
    CommandLine,
    /// A `*.gguf` in `--models-dir`.
    Directory,
    /// Made by a client (`/api/create`, `/api/copy`, an alias).
    Created,
}

/// One known name.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    pub target: Target,
    #[serde(default)]
    pub overrides: Overrides,
    pub origin: Origin,
}

/// A name resolved to the file it runs and everything layered over it.
#[derive(Clone, Debug)]
pub struct Resolved {
    /// The stored name.
    pub name: String,
    pub facts: Arc<Facts>,
    pub overrides: Overrides,
}

/// Every known name.
pub struct Catalog {
    entries: BTreeMap<String, Entry>,
    /// Header facts per file, or why the file cannot be used.
    facts: HashMap<PathBuf, Result<Arc<Facts>, String>>,
    /// The models directory, where created names are saved.
    dir: Option<PathBuf>,
    /// The model requests without a name use (the first `--model`, else the first found).
    default: Option<String>,
    /// Whether changes are saved to the names file (not when a database keeps them).
    file_store: bool,
}

/// Persisted form of the names clients made and of overrides set on file names.
#[derive(Default, Serialize, Deserialize)]
struct Stored {
    #[serde(default)]
    models: BTreeMap<String, Entry>,
}

impl Catalog {
    /// Builds the catalog from `--model NAME=PATH` pairs and the models directory.
    /// Unreadable files are kept as broken entries; only a bad command line is an error.
    pub fn new(models: &[(Option<String>, PathBuf)], dir: Option<&Path>) -> anyhow::Result<Self> {
        let mut c = Catalog {
            entries: BTreeMap::new(),
            facts: HashMap::new(),
            dir: dir.map(Path::to_path_buf),
            default: None,
            file_store: true,
        };
        for (name, path) in models {
            // A GGUF file, or a Hugging Face folder (an embedding model).
            if !path.exists() {
                anyhow::bail!("model {} does not exist", path.display());
            }
            let name = match name {
                Some(n) => names::check_new(n).map_err(|e| anyhow::anyhow!(e.to_string()))?,
                None => names::from_file(path),
            };
            if c.entries.contains_key(&name) {
                anyhow::bail!("two --model options use the name {name:?}; give one NAME=PATH");
            }
            c.add_file(name.clone(), path.clone(), Origin::CommandLine);
            c.default.get_or_insert(name);
        }
        if let Some(d) = dir {
            c.scan(d)?;
            c.load_store()?;
        }
        if c.default.is_none() {
            c.default = c.entries.keys().next().cloned();
        }
        Ok(c)
    }

    fn scan(&mut self, dir: &Path) -> anyhow::Result<()> {
        let rd = std::fs::read_dir(dir)
            .map_err(|e| anyhow::anyhow!("cannot read --models-dir {}: {e}", dir.display()))?;
        let mut files: Vec<PathBuf> = rd
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "gguf") && p.is_file())
            // Vision projectors go with the model beside them, never served alone.
            .filter(|p| !super::is_projector_name(p))
            .collect();
        files.sort();
        for path in files {
            let name = names::from_file(&path);
            if self.entries.contains_key(&name) {
                continue; // the command line named it already
            }
            self.add_file(name, path, Origin::Directory);
        }
        Ok(())
    }

    fn load_store(&mut self) -> anyhow::Result<()> {
        let Some(path) = self.store_path() else {
            return Ok(());
        };
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => anyhow::bail!("cannot read {}: {e}", path.display()),
        };
        let stored: Stored = serde_json::from_str(&text)
            .map_err(|e| anyhow::anyhow!("{} is not valid: {e}", path.display()))?;
        self.merge(stored.models);
        Ok(())
    }

    /// Adds stored names and overrides to what the command line and the scan found.
    fn merge(&mut self, models: BTreeMap<String, Entry>) {
        for (name, e) in models {
            match (self.entries.get_mut(&name), e.origin) {
                // Overrides set on a file name: the file is found by the scan again.
                (Some(existing), Origin::CommandLine | Origin::Directory) => {
                    existing.overrides = e.overrides;
                }
                (None, Origin::CommandLine | Origin::Directory) => {}
                (_, Origin::Created) => {
                    if let Target::File(p) = &e.target {
                        self.read_facts(p);
                    }
                    self.entries.insert(name, e);
                }
            }
        }
    }

    /// Stops saving to the names file: the caller keeps [`Catalog::persisted`] elsewhere.
    pub fn use_database(&mut self) {
        self.file_store = false;
    }

    /// The names file, when there is a models directory (whether or not it exists).
    pub fn store_file(&self) -> Option<PathBuf> {
        self.store_path()
    }

    /// What is saved: the created names and the overrides set on file names.
    pub fn persisted(&self) -> BTreeMap<String, Entry> {
        self.entries
            .iter()
            .filter(|(_, e)| e.origin == Origin::Created || e.overrides != Overrides::default())
            .map(|(n, e)| (n.clone(), e.clone()))
            .collect()
    }

    /// Makes the saved part of the catalog `stored` (another replica's changes): created names
    /// it lacks go, file names it lacks lose their overrides, and the rest is merged as at
    /// start-up.
    pub fn replace_persisted(&mut self, stored: BTreeMap<String, Entry>) {
        self.entries.retain(|n, e| {
            if !stored.contains_key(n) {
                e.overrides = Overrides::default();
            }
            e.origin != Origin::Created || stored.contains_key(n)
        });
        self.merge(stored);
        if self
            .default
            .as_ref()
            .is_some_and(|d| !self.entries.contains_key(d))
        {
            self.default = self.entries.keys().next().cloned();
        }
    }

    fn store_path(&self) -> Option<PathBuf> {
        self.dir.as_ref().map(|d| d.join(STORE_FILE))
    }

    /// Writes the created names and overrides (atomically: a temp file renamed over the old).
    fn save(&self) -> Result<(), RegistryError> {
        let Some(path) = self.store_path().filter(|_| self.file_store) else {
            return Ok(());
        };
        let stored = Stored {
            models: self.persisted(),
        };
        let text = serde_json::to_string_pretty(&stored).unwrap_or_default();
        let tmp = path.with_extension("json.tmp");
        std::fs::write(&tmp, text)
            .and_then(|_| std::fs::rename(&tmp, &path))
            .map_err(|e| RegistryError::Io(format!("cannot save {}: {e}", path.display())))
    }

    fn add_file(&mut self, name: String, path: PathBuf, origin: Origin) {
        self.read_facts(&path);
        self.entries.insert(
            name,
            Entry {
                target: Target::File(path),
                overrides: Overrides::default(),
                origin,
            },
        );
    }

    fn read_facts(&mut self, path: &Path) {
        if !self.facts.contains_key(path) {
            let f = Facts::read(path).map(Arc::new);
            if let Err(e) = &f {
                tracing::warn!(file = %path.display(), error = %e, "model file is broken");
            }
            self.facts.insert(path.to_path_buf(), f);
        }
    }

    /// Adds a file that arrived in the models directory (pull, import, quantize) — or reads
    /// it anew when it replaced one — reachable as `name` (an alias of the file's own name
    /// when they differ). Returns the name.
    pub fn add_arrived(&mut self, name: &str, path: &Path) -> Result<String, RegistryError> {
        let stem = names::from_file(path);
        self.facts.remove(path);
        self.add_file(stem.clone(), path.to_path_buf(), Origin::Directory);
        self.default.get_or_insert(stem.clone());
        if names::normalise(name) == stem {
            return Ok(stem);
        }
        self.alias(name, &stem)
    }

    /// Serves the default model with the vision projector at `path` (`--mmproj`): it must be
    /// a projector as wide as the model's embeddings.
    pub fn set_default_projector(&mut self, path: &Path) -> anyhow::Result<()> {
        let name = self
            .default
            .clone()
            .ok_or_else(|| anyhow::anyhow!("--mmproj needs a model (--model or --models-dir)"))?;
        let facts = self
            .resolve(&name)
            .map_err(|e| anyhow::anyhow!("--mmproj: {e}"))?
            .facts;
        let proj = super::ProjectorFacts::read(path).map_err(anyhow::Error::msg)?;
        if !facts.capabilities.completion {
            anyhow::bail!("--mmproj: model {name:?} does not generate text");
        }
        if proj.projection_dim != facts.embedding_length {
            anyhow::bail!(
                "--mmproj {}: its projection width {} does not match model {name:?}'s embedding \
                 width {}",
                shown(path),
                proj.projection_dim,
                facts.embedding_length
            );
        }
        let mut with = (*facts).clone();
        with.mmproj = Some(proj);
        self.facts.insert(facts.path.clone(), Ok(Arc::new(with)));
        Ok(())
    }

    /// The name requests without one use.
    pub fn default_name(&self) -> Option<&str> {
        self.default.as_deref()
    }

    /// Every name, sorted.
    pub fn names(&self) -> Vec<String> {
        self.entries.keys().cloned().collect()
    }

    pub fn entry(&self, name: &str) -> Option<&Entry> {
        self.entries.get(name)
    }

    /// The stored name a requested name refers to: exact, without `:latest`/`.gguf`, or a
    /// file's name.
    pub fn find(&self, requested: &str) -> Option<String> {
        self.find_in(requested, &Scope::All)
    }

    /// [`find`](Self::find) among the names `scope` reaches only: the one lookup every
    /// request goes through, so a name out of scope is as unknown as a missing one.
    pub fn find_in(&self, requested: &str, scope: &Scope) -> Option<String> {
        let n = names::normalise(requested);
        if self.entries.contains_key(&n) && scope.allows(&n) {
            return Some(n);
        }
        self.entries
            .iter()
            .filter(|(k, _)| scope.allows(k))
            .find(|(_, e)| match &e.target {
                Target::File(p) => p.file_name().is_some_and(|f| f == requested.trim()),
                Target::Alias(_) => false,
            })
            .map(|(k, _)| k.clone())
    }

    /// Every name `scope` reaches, sorted.
    pub fn names_in(&self, scope: &Scope) -> Vec<String> {
        self.entries
            .keys()
            .filter(|k| scope.allows(k))
            .cloned()
            .collect()
    }

    /// 404 naming what exists.
    pub fn unknown(&self, requested: &str) -> RegistryError {
        self.unknown_in(requested, &Scope::All)
    }

    /// 404 naming what exists within `scope` (nothing outside it is named).
    pub fn unknown_in(&self, requested: &str, scope: &Scope) -> RegistryError {
        let known: Vec<String> = self
            .names_in(scope)
            .iter()
            .map(|k| names::tagged(k))
            .collect();
        RegistryError::UnknownModel {
            name: requested.to_string(),
            known,
        }
    }

    /// Follows aliases to the file, merging overrides (the nearer name wins).
    pub fn resolve(&self, requested: &str) -> Result<Resolved, RegistryError> {
        self.resolve_in(requested, &Scope::All)
    }

    /// [`resolve`](Self::resolve) of a name `scope` reaches (the name asked for: the alias
    /// chain behind it is the catalog's business), else the 404 of a missing name.
    pub fn resolve_in(&self, requested: &str, scope: &Scope) -> Result<Resolved, RegistryError> {
        let name = self
            .find_in(requested, scope)
            .ok_or_else(|| self.unknown_in(requested, scope))?;
        let mut overrides = Overrides::default();
        let mut cur = name.clone();
        for _ in 0..16 {
            let e = self.entries.get(&cur).ok_or_else(|| {
                RegistryError::Unavailable(format!(
                    "model {name:?} is an alias of {cur:?}, which no longer exists"
                ))
            })?;
            overrides = e.overrides.under(&overrides);
            match &e.target {
                Target::Alias(next) => cur = next.clone(),
                Target::File(p) => {
                    let facts = self.facts_of(p).map_err(|why| {
                        RegistryError::Unavailable(format!("model {name:?} cannot be used: {why}"))
                    })?;
                    return Ok(Resolved {
                        name,
                        facts,
                        overrides,
                    });
                }
            }
        }
        Err(RegistryError::invalid(format!(
            "model {name:?} is an alias chain that does not end"
        )))
    }

    /// The facts of a file, or why it is broken.
    pub fn facts_of(&self, path: &Path) -> Result<Arc<Facts>, String> {
        match self.facts.get(path) {
            Some(r) => r.clone(),
            None => Err(format!("{} is not known", shown(path))),
        }
    }

    /// Why `name` is broken, if it is.
    pub fn broken(&self, name: &str) -> Option<String> {
        self.resolve(name).err().map(|e| e.to_string())
    }

    /// Adds a created name: a copy of `from`'s file and overrides with `extra` on top.
    pub fn create(
        &mut self,
        name: &str,
        from: &str,
        extra: Overrides,
    ) -> Result<String, RegistryError> {
        let name = names::check_new(name)?;
        let base = self.resolve(from).map_err(|e| match e {
            RegistryError::UnknownModel { .. } => {
                RegistryError::invalid(format!("cannot create {name:?}: {e}"))
            }
            e => e,
        })?;
        if let Some(e) = self.entries.get(&name) {
            if e.origin != Origin::Created {
                return Err(RegistryError::Conflict(format!(
                    "{name:?} is a model file's name; create the variant under another name"
                )));
            }
        }
        self.entries.insert(
            name.clone(),
            Entry {
                target: Target::File(base.facts.path.clone()),
                overrides: base.overrides.under(&extra),
                origin: Origin::Created,
            },
        );
        self.save()?;
        Ok(name)
    }

    /// Adds `alias` pointing at `target` (which must exist).
    pub fn alias(&mut self, alias: &str, target: &str) -> Result<String, RegistryError> {
        let alias = names::check_new(alias)?;
        let target = self.find(target).ok_or_else(|| self.unknown(target))?;
        if alias == target {
            return Err(RegistryError::invalid("an alias cannot point at itself"));
        }
        if let Some(e) = self.entries.get(&alias) {
            if e.origin != Origin::Created {
                return Err(RegistryError::Conflict(format!(
                    "{alias:?} is a model file's name and cannot become an alias"
                )));
            }
        }
        self.entries.insert(
            alias.clone(),
            Entry {
                target: Target::Alias(target),
                overrides: Overrides::default(),
                origin: Origin::Created,
            },
        );
        self.save()?;
        Ok(alias)
    }

    /// Replaces a name's own overrides.
    pub fn set_overrides(
        &mut self,
        requested: &str,
        o: Overrides,
    ) -> Result<String, RegistryError> {
        let name = self
            .find(requested)
            .ok_or_else(|| self.unknown(requested))?;
        if let Some(e) = self.entries.get_mut(&name) {
            e.overrides = o;
        }
        self.save()?;
        Ok(name)
    }

    /// Removes a name. Returns the file to delete from disk when no other name uses it and it
    /// lives in the models directory (a file named on the command line is the operator's).
    pub fn delete(&mut self, requested: &str) -> Result<(String, Option<PathBuf>), RegistryError> {
        let name = self
            .find(requested)
            .ok_or_else(|| self.unknown(requested))?;
        let e = self.entries.remove(&name).expect("found above");
        // Aliases of the deleted name would dangle: they go with it.
        let dangling: Vec<String> = self
            .entries
            .iter()
            .filter(|(_, x)| x.target == Target::Alias(name.clone()))
            .map(|(k, _)| k.clone())
            .collect();
        for d in dangling {
            self.entries.remove(&d);
        }
        if self.default.as_deref() == Some(name.as_str()) {
            self.default = self.entries.keys().next().cloned();
        }
        let mut remove = None;
        if let Target::File(p) = &e.target {
            let still_used = self.entries.values().any(|x| x.target == e.target);
            let in_dir = self
                .dir
                .as_ref()
                .is_some_and(|d| p.parent().is_some_and(|parent| parent == d.as_path()));
            if !still_used && in_dir && e.origin != Origin::CommandLine {
                remove = Some(p.clone());
                self.facts.remove(p);
            }
        }
        self.save()?;
        Ok((name, remove))
    }

    /// Adds `name` for a model file already on disk (`POST /api/v1/models/library`), used in
    /// place, saved like a created name. The caller has checked where `path` is; here: the
    /// name is new and the file's header reads (else 400, with the reason).
    pub fn add_library_entry(&mut self, name: &str, path: &Path) -> Result<String, RegistryError> {
        let name = names::check_new(name)?;
        if self.entries.contains_key(&name) {
            return Err(RegistryError::Conflict(format!(
                "{name:?} is already a model name: pick another, or delete it first"
            )));
        }
        let facts = match self.facts.get(path) {
            Some(Ok(f)) => f.clone(),
            _ => Arc::new(Facts::read(path).map_err(RegistryError::Invalid)?),
        };
        self.facts.insert(path.to_path_buf(), Ok(facts));
        self.entries.insert(
            name.clone(),
            Entry {
                target: Target::File(path.to_path_buf()),
                overrides: Overrides::default(),
                origin: Origin::Created,
            },
        );
        self.default.get_or_insert(name.clone());
        self.save()?;
        Ok(name)
    }
}
