//! Files only their owner may read: the SQLite database (it holds key and password hashes,
//! sessions and the audit log) and its WAL and shared-memory files are 0600, folders created
//! for them 0700. SQLite gives the `-wal` and `-shm` files the main file's mode, so creating
//! that one 0600 before SQLite opens it covers all three; files left 0644 by an older weft
//! are tightened on open.

use std::path::{Path, PathBuf};

/// Creates `dir` and its missing parents, 0700 on Unix (folders that exist keep their mode).
pub fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    let mut b = std::fs::DirBuilder::new();
    b.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut b, 0o700);
    b.create(dir)
}

/// Makes an existing folder 0700 (weft's own home: nobody else's business).
pub fn restrict_dir(dir: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    }
    #[cfg(not(unix))]
    let _ = dir;
    Ok(())
}

/// The database file and its companions.
fn family(db: &Path) -> [PathBuf; 3] {
    let with = |suffix: &str| {
        let mut s = db.as_os_str().to_owned();
        s.push(suffix);
        PathBuf::from(s)
    };
    [db.to_path_buf(), with("-wal"), with("-shm")]
}

/// Before SQLite opens `db`: creates it empty and 0600 when missing, and makes it and any
/// `-wal`/`-shm` beside it 0600.
pub fn prepare_db_file(db: &Path) -> std::io::Result<()> {
    let mut o = std::fs::OpenOptions::new();
    o.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut o, 0o600);
    match o.open(db) {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    restrict_db_files(db)
}

/// Makes the database and its `-wal`/`-shm` files (those that exist) 0600.
pub fn restrict_db_files(db: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    for f in family(db) {
        use std::os::unix::fs::PermissionsExt;
        match std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    #[cfg(not(unix))]
    let _ = family(db);
    Ok(())
}
