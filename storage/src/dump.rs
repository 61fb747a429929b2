//! A logical dump of the whole storage, and loading one back: rows as JSON objects (column →
//! value), the same on both backends, so a dump from SQLite loads into Postgres and back.
//!
//! One generic path serves every table: columns are read from the database's own catalogue
//! (`pragma_table_info` on SQLite, `information_schema.columns` on Postgres), so a table
//! added by a migration needs only its name in [`TABLES`] (in foreign-key order). A table the
//! dump lacks (a backup from before the table existed) is left empty by a load.

use std::collections::BTreeMap;

use serde_json::{Map, Value};
// Table and column names in the SQL built here come from TABLES and the database's own
// catalogue, never from a dump's text (a dump's column name is used only once it matched one).
use sqlx::{AssertSqlSafe, Column, Row as _, TypeInfo, ValueRef};

use crate::{Result, Storage, StorageError};

/// Every table a backup holds, parents before children: a load deletes in reverse order and
/// inserts in this order, so foreign keys hold throughout. **A migration that adds a table
/// must add it here** (the `every_table_is_dumped` test fails otherwise), or to
/// [`NOT_BACKED_UP`] with the reason; `weft_migrations` is not data and stays out.
pub const TABLES: &[&str] = &[
    "tenants",
    "api_keys",
    "users",
    "settings",
    "audit",
    "moderation_rules",
    "ab_tests",
    "ab_votes",
    "adapters",
    "chat_sessions",
    "chat_messages",
    "jobs",
    "model_aliases",
    "responses",
];

/// Tables a backup leaves out on purpose: `rate_limits` holds only when each key's
/// rate-limit bucket is full again (minutes of state, rebuilt by use), and restoring it would
/// put a key back into debt it has long paid off. A load leaves them as they are.
pub const NOT_BACKED_UP: &[&str] = &["rate_limits"];

/// One row: column name → JSON value (integers, reals, text, booleans, `null`; bytes as hex).
pub type Row = Map<String, Value>;

/// The storage type of a column, as far as a dump cares.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Col {
    Int,
    Real,
    Text,
    Bool,
    Bytes,
}

/// A value ready to bind.
enum Bound {
    Int(Option<i64>),
    Real(Option<f64>),
    Text(Option<String>),
    Bool(Option<bool>),
    Bytes(Option<Vec<u8>>),
}

/// SQLite's affinity rules (section 3.1 of its datatype page), plus BOOL for booleans.
fn sqlite_col(decl: &str) -> Col {
    let d = decl.to_ascii_uppercase();
    if d.contains("INT") {
        Col::Int
    } else if d.contains("BOOL") {
        Col::Bool
    } else if d.contains("CHAR") || d.contains("CLOB") || d.contains("TEXT") {
        Col::Text
    } else if d.contains("REAL") || d.contains("FLOA") || d.contains("DOUB") {
        Col::Real
    } else if d.contains("BLOB") || d.is_empty() {
        Col::Bytes
    } else {
        Col::Real
    }
}

fn postgres_col(data_type: &str) -> Result<Col> {
    Ok(match data_type {
        "bigint" | "integer" | "smallint" => Col::Int,
        "double precision" | "real" | "numeric" => Col::Real,
        "text" | "character varying" | "character" => Col::Text,
        "boolean" => Col::Bool,
        "bytea" => Col::Bytes,
        other => {
            return Err(StorageError::Corrupt(format!(
                "column type {other} has no dump format (add it to storage/src/dump.rs)"
            )))
        }
    })
}

/// A column value as JSON, by the value's own type.
macro_rules! cell {
    ($row:expr, $i:expr, $table:expr) => {{
        let raw = $row.try_get_raw($i)?;
        if raw.is_null() {
            Value::Null
        } else {
            let ty = raw.type_info().name().to_ascii_uppercase();
            match ty.as_str() {
                "INTEGER" | "INT8" | "BIGINT" => Value::from($row.try_get::<i64, _>($i)?),
                "INT4" | "INT" => Value::from($row.try_get::<i32, _>($i)?),
                "INT2" | "SMALLINT" => Value::from($row.try_get::<i16, _>($i)?),
                "REAL" | "FLOAT8" | "DOUBLE PRECISION" => Value::from($row.try_get::<f64, _>($i)?),
                "FLOAT4" => Value::from($row.try_get::<f32, _>($i)?),
                "BOOL" | "BOOLEAN" => Value::from($row.try_get::<bool, _>($i)?),
                "TEXT" | "VARCHAR" | "CHAR" | "BPCHAR" | "NAME" => {
                    Value::from($row.try_get::<String, _>($i)?)
                }
                "BLOB" | "BYTEA" => Value::from(hex($row.try_get::<Vec<u8>, _>($i)?.as_slice())),
                other => {
                    return Err(StorageError::Corrupt(format!(
                        "{}.{}: type {other} has no dump format",
                        $table,
                        $row.columns()[$i].name()
                    )))
                }
            }
        }
    }};
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// `value` for a column of type `col`, or why not.
fn bind_value(col: Col, v: &Value) -> std::result::Result<Bound, String> {
    let bad = |want: &str| Err(format!("expected {want}, found {v}"));
    Ok(match (col, v) {
        (Col::Int, Value::Null) => Bound::Int(None),
        (Col::Real, Value::Null) => Bound::Real(None),
        (Col::Text, Value::Null) => Bound::Text(None),
        (Col::Bool, Value::Null) => Bound::Bool(None),
        (Col::Bytes, Value::Null) => Bound::Bytes(None),
        (Col::Int, Value::Number(n)) if n.is_i64() => Bound::Int(n.as_i64()),
        (Col::Int, _) => return bad("an integer"),
        (Col::Real, Value::Number(n)) => Bound::Real(n.as_f64()),
        (Col::Real, _) => return bad("a number"),
        (Col::Text, Value::String(s)) => Bound::Text(Some(s.clone())),
        (Col::Text, _) => return bad("a string"),
        (Col::Bool, Value::Bool(b)) => Bound::Bool(Some(*b)),
        // SQLite keeps booleans as 0 / 1.
        (Col::Bool, Value::Number(n)) if matches!(n.as_i64(), Some(0 | 1)) => {
            Bound::Bool(Some(n.as_i64() == Some(1)))
        }
        (Col::Bool, _) => return bad("a boolean"),
        (Col::Bytes, Value::String(s)) => match unhex(s) {
            Some(b) => Bound::Bytes(Some(b)),
            None => return bad("hex bytes"),
        },
        (Col::Bytes, _) => return bad("hex bytes"),
    })
}

/// A table's rows checked against its columns, ready to insert.
struct Prepared {
    table: &'static str,
    sql: String,
    rows: Vec<Vec<Bound>>,
}

/// A dump that does not fit this database's schema (a caller's fault: 422).
fn invalid(msg: String) -> StorageError {
    StorageError::Invalid(msg)
}

/// One step of a streamed dump ([`Storage::dump_to`]): a table starts, or a row of the table
/// that started last.
#[derive(Debug)]
pub enum DumpItem {
    Table(&'static str),
    Row(Row),
}

impl Storage {
    /// The same snapshot as [`Storage::dump`], sent row by row into `out` as it is read (a
    /// bounded channel: reading waits for the consumer), so memory does not grow with the
    /// database. Every table of [`TABLES`] is announced, in that order, even when empty.
    /// Stops early, without an error, when the receiver is dropped.
    pub async fn dump_to(&self, out: &tokio::sync::mpsc::Sender<DumpItem>) -> Result<()> {
        use futures_util::TryStreamExt;
        macro_rules! send_all {
            ($tx:expr) => {{
                'tables: for &table in TABLES {
                    if out.send(DumpItem::Table(table)).await.is_err() {
                        break 'tables;
                    }
                    let sql = format!("SELECT * FROM {table} ORDER BY 1");
                    let mut rows = sqlx::query(AssertSqlSafe(sql)).fetch(&mut *$tx);
                    while let Some(r) = rows.try_next().await? {
                        let mut m = Map::new();
                        for (i, c) in r.columns().iter().enumerate() {
                            m.insert(c.name().to_string(), cell!(r, i, table));
                        }
                        if out.send(DumpItem::Row(m)).await.is_err() {
                            break 'tables;
                        }
                    }
                }
            }};
        }
        match &*self.db {
            crate::Db::Sqlite(p) => {
                let mut tx = p.begin().await?;
                send_all!(tx);
                tx.commit().await?;
            }
            crate::Db::Postgres(p) => {
                let mut tx = p.begin().await?;
                sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                    .execute(&mut *tx)
                    .await?;
                send_all!(tx);
                tx.commit().await?;
            }
        }
        Ok(())
    }

    /// Every row of every table in [`TABLES`], in primary-key order, read in one transaction
    /// so the tables agree with each other (a snapshot, while other requests write on).
    pub async fn dump(&self) -> Result<BTreeMap<&'static str, Vec<Row>>> {
        macro_rules! read_all {
            ($tx:expr) => {{
                let mut out = BTreeMap::new();
                for &table in TABLES {
                    let sql = format!("SELECT * FROM {table} ORDER BY 1");
                    let rows = sqlx::query(AssertSqlSafe(sql)).fetch_all(&mut *$tx).await?;
                    let mut json = Vec::with_capacity(rows.len());
                    for r in &rows {
                        let mut m = Map::new();
                        for (i, c) in r.columns().iter().enumerate() {
                            m.insert(c.name().to_string(), cell!(r, i, table));
                        }
                        json.push(m);
                    }
                    out.insert(table, json);
                }
                out
            }};
        }
        let out = match &*self.db {
            // A deferred transaction's first read fixes its snapshot (WAL).
            crate::Db::Sqlite(p) => {
                let mut tx = p.begin().await?;
                let out = read_all!(tx);
                tx.commit().await?;
                out
            }
            crate::Db::Postgres(p) => {
                let mut tx = p.begin().await?;
                sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                    .execute(&mut *tx)
                    .await?;
                let out = read_all!(tx);
                tx.commit().await?;
                out
            }
        };
        Ok(out)
    }

    /// The columns of `table` and their types, from the database's catalogue.
    async fn columns(&self, table: &str) -> Result<Vec<(String, Col)>> {
        match &*self.db {
            crate::Db::Sqlite(p) => {
                let rows = sqlx::query("SELECT name, type FROM pragma_table_info($1) ORDER BY cid")
                    .bind(table)
                    .fetch_all(p)
                    .await?;
                rows.iter()
                    .map(|r| {
                        Ok((
                            r.try_get("name")?,
                            sqlite_col(&r.try_get::<String, _>("type")?),
                        ))
                    })
                    .collect()
            }
            crate::Db::Postgres(p) => {
                let sql = "SELECT column_name::text AS name, data_type::text AS ty FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = $1 ORDER BY ordinal_position";
                let rows = sqlx::query(sql).bind(table).fetch_all(p).await?;
                rows.iter()
                    .map(|r| {
                        Ok((
                            r.try_get("name")?,
                            postgres_col(&r.try_get::<String, _>("ty")?)?,
                        ))
                    })
                    .collect()
            }
        }
    }

    /// Checks `dump` (table → rows) against this database's schema without writing: unknown
    /// tables or columns and values of the wrong type are [`StorageError::Invalid`].
    async fn prepare(&self, dump: &BTreeMap<String, Vec<Row>>) -> Result<Vec<Prepared>> {
        if let Some(t) = dump.keys().find(|t| !TABLES.contains(&t.as_str())) {
            return Err(invalid(format!("unknown table {t:?}")));
        }
        let mut out = Vec::new();
        for &table in TABLES {
            let cols = self.columns(table).await?;
            let Some(rows) = dump.get(table) else {
                continue;
            };
            // Insert the columns the dump names (the others take their defaults); every row
            // of a table names the same ones.
            let names: Vec<&String> = match rows.first() {
                Some(r) => r.keys().collect(),
                None => continue,
            };
            let mut types = Vec::new();
            for n in &names {
                match cols.iter().find(|(c, _)| c == *n) {
                    Some((_, t)) => types.push(*t),
                    None => return Err(invalid(format!("{table}: unknown column {n:?}"))),
                }
            }
            let mut bound = Vec::with_capacity(rows.len());
            for (i, r) in rows.iter().enumerate() {
                if r.len() != names.len() || names.iter().any(|n| !r.contains_key(*n)) {
                    return Err(invalid(format!(
                        "{table} row {}: its columns differ from the first row's",
                        i + 1
                    )));
                }
                let mut vals = Vec::with_capacity(names.len());
                for (n, t) in names.iter().zip(&types) {
                    let v = bind_value(*t, &r[*n])
                        .map_err(|e| invalid(format!("{table} row {}: {n}: {e}", i + 1)))?;
                    vals.push(v);
                }
                bound.push(vals);
            }
            let marks: Vec<String> = (1..=names.len()).map(|i| format!("${i}")).collect();
            let cols_sql: Vec<String> = names.iter().map(|n| format!("\"{n}\"")).collect();
            out.push(Prepared {
                table,
                sql: format!(
                    "INSERT INTO {table} ({}) VALUES ({})",
                    cols_sql.join(", "),
                    marks.join(", ")
                ),
                rows: bound,
            });
        }
        Ok(out)
    }

    /// Replaces the rows of every table in [`TABLES`] with `dump`'s, in one transaction: on
    /// any failure (a row of the wrong type, a broken reference, a duplicate) nothing
    /// changes. A table `dump` lacks is left empty.
    pub async fn load_dump(&self, dump: &BTreeMap<String, Vec<Row>>) -> Result<()> {
        let prepared = self.prepare(dump).await?;
        // A row the database refuses (duplicate, missing parent) is the dump's fault.
        let refused = |e: sqlx::Error| match StorageError::from(e) {
            StorageError::Conflict(m) => invalid(format!("the backup's rows conflict: {m}")),
            other => other,
        };
        macro_rules! apply {
            ($tx:expr) => {{
                for table in TABLES.iter().rev() {
                    sqlx::query(AssertSqlSafe(format!("DELETE FROM {table}")))
                        .execute(&mut *$tx)
                        .await?;
                }
                for p in &prepared {
                    for row in &p.rows {
                        let mut q = sqlx::query(AssertSqlSafe(p.sql.clone()));
                        for v in row {
                            q = match v {
                                Bound::Int(x) => q.bind(*x),
                                Bound::Real(x) => q.bind(*x),
                                Bound::Text(x) => q.bind(x.clone()),
                                Bound::Bool(x) => q.bind(*x),
                                Bound::Bytes(x) => q.bind(x.clone()),
                            };
                        }
                        q.execute(&mut *$tx).await.map_err(|e| {
                            let e = refused(e);
                            match e {
                                StorageError::Invalid(m) => invalid(format!("{}: {m}", p.table)),
                                other => other,
                            }
                        })?;
                    }
                }
            }};
        }
        match &*self.db {
            crate::Db::Sqlite(p) => {
                // Take the write lock first, so no other writer slips between delete and insert.
                let mut tx = p.begin_with("BEGIN IMMEDIATE").await?;
                apply!(tx);
                tx.commit().await?;
            }
            crate::Db::Postgres(p) => {
                let mut tx = p.begin().await?;
                // Other replicas wait (their writes would interleave with the load).
                sqlx::query(AssertSqlSafe(format!(
                    "LOCK TABLE {} IN ACCESS EXCLUSIVE MODE",
                    TABLES.join(", ")
                )))
                .execute(&mut *tx)
                .await?;
                apply!(tx);
                // Serial columns continue after the loaded ids.
                let serials = "SELECT table_name::text AS t, column_name::text AS c FROM information_schema.columns WHERE table_schema = current_schema() AND column_default LIKE 'nextval(%'";
                for r in sqlx::query(serials).fetch_all(&mut *tx).await? {
                    let (t, c): (String, String) = (r.try_get("t")?, r.try_get("c")?);
                    if !TABLES.contains(&t.as_str()) {
                        continue;
                    }
                    let fix = format!(
                        "SELECT setval(pg_get_serial_sequence('{t}', '{c}'), COALESCE((SELECT MAX(\"{c}\") FROM {t}), 0) + 1, false)"
                    );
                    sqlx::query(AssertSqlSafe(fix)).execute(&mut *tx).await?;
                }
                tx.commit().await?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn affinities() {
        assert_eq!(sqlite_col("BIGINT"), Col::Int);
        assert_eq!(sqlite_col("TEXT"), Col::Text);
        assert_eq!(sqlite_col("BOOLEAN"), Col::Bool);
        assert_eq!(sqlite_col("BLOB"), Col::Bytes);
        assert_eq!(sqlite_col("DOUBLE"), Col::Real);
    }

    #[test]
    fn values_are_checked() {
        assert!(bind_value(Col::Int, &Value::from(3)).is_ok());
        assert!(bind_value(Col::Int, &Value::from("3")).is_err());
        assert!(bind_value(Col::Int, &Value::from(1.5)).is_err());
        assert!(bind_value(Col::Text, &Value::from(3)).is_err());
        assert!(bind_value(Col::Bool, &Value::from(1)).is_ok());
        assert!(bind_value(Col::Bool, &Value::from(2)).is_err());
        assert!(bind_value(Col::Bytes, &Value::from("0aff")).is_ok());
        assert!(bind_value(Col::Bytes, &Value::from("0g")).is_err());
        assert_eq!(unhex(&hex(&[0, 255, 16])), Some(vec![0, 255, 16]));
    }
}
