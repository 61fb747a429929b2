//! Which names a caller may reach: every name, or a tenant's allow-list. The catalog's
//! lookups serving a request take one ([`super::Catalog::resolve_in`], `find_in`, `names_in`),
//! so a name outside the scope is exactly as unknown as a name never made: absent from lists,
//! a 404 on show and download, and never named in "available: …" messages.

use super::names;

/// The names a caller may reach.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Scope {
    /// Every name (no tenant, or a tenant without an allow-list).
    #[default]
    All,
    /// Only these stored names (normalised); empty: none at all.
    Only(Vec<String>),
}

impl Scope {
    /// A tenant's allow-list (`None`: every model).
    pub fn allow_list(models: Option<&[String]>) -> Scope {
        match models {
            None => Scope::All,
            Some(m) => Scope::Only(m.iter().map(|n| names::normalise(n)).collect()),
        }
    }

    /// Whether the stored name `name` is in scope.
    pub fn allows(&self, name: &str) -> bool {
        match self {
            Scope::All => true,
            Scope::Only(allowed) => allowed.contains(&names::normalise(name)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_allow_list_matches_normalised_names() {
        let s = Scope::allow_list(Some(&["smol:latest".to_string()]));
        assert!(s.allows("smol") && s.allows("smol.gguf") && !s.allows("smol2"));
        assert!(!Scope::allow_list(Some(&[])).allows("smol"));
        assert!(Scope::allow_list(None).allows("anything"));
    }
}
