//! The connection the table modules run their SQL on: SQLite (rusqlite) or PostgreSQL (the
//! blocking `postgres` client, on the store thread), behind the small part of rusqlite's API
//! the modules use. A statement is written once, in the SQL both engines share; its `?N`
//! parameters become `$N` for PostgreSQL. Values cross as SQLite's five kinds (null, integer,
//! real, text, blob), so a module reads a row the same way from either engine.
//!
//! What the engines do not share is kept out of the modules: the schema (`migrations`), the
//! full-text search (`search`), the syncing of groups of writes (SQLite only).

use std::cell::RefCell;
use std::collections::HashMap;
use std::ops::{ControlFlow, Deref};

use postgres::types::{IsNull, ToSql as PgToSql, Type, to_sql_checked};
use rusqlite::ToSql;
use rusqlite::types::{FromSql, FromSqlError, ToSqlOutput, ValueRef};

use super::StoreError;

/// A connection to either engine.
pub enum Db {
    Sqlite(rusqlite::Connection),
    Postgres(Box<Pg>),
}

/// A PostgreSQL connection and its prepared statements, by their SQL.
pub struct Pg {
    client: RefCell<postgres::Client>,
    statements: RefCell<HashMap<String, postgres::Statement>>,
    /// Makes the connection again once the server has closed it (a restart, a failover).
    connect: Box<dyn Fn() -> Result<postgres::Client, StoreError> + Send>,
}

/// Prepared statements kept per PostgreSQL connection; past it the cache starts over (SQL
/// built per call, like an `IN` list, would otherwise grow it without end).
const PG_STATEMENTS_KEPT: usize = 256;

impl Pg {
    /// Connect with `connect`, which is kept to connect again.
    pub fn connect(
        connect: Box<dyn Fn() -> Result<postgres::Client, StoreError> + Send>,
    ) -> Result<Pg, StoreError> {
        Ok(Pg {
            client: RefCell::new(connect()?),
            statements: RefCell::new(HashMap::new()),
            connect,
        })
    }

    /// `client`, with `connect` kept to connect again.
    pub fn connect_with(
        client: postgres::Client,
        connect: Box<dyn Fn() -> Result<postgres::Client, StoreError> + Send>,
    ) -> Pg {
        Pg {
            client: RefCell::new(client),
            statements: RefCell::new(HashMap::new()),
            connect,
        }
    }

    /// Connect again when the server has closed the connection; its prepared statements
    /// went with it.
    pub fn reconnect_if_closed(&self) -> Result<(), StoreError> {
        if !self.client.borrow().is_closed() {
            return Ok(());
        }
        let client = (self.connect)()?;
        *self.client.borrow_mut() = client;
        self.statements.borrow_mut().clear();
        tracing::info!("store: connected to PostgreSQL again");
        Ok(())
    }

    fn statement(&self, sql: &str) -> Result<postgres::Statement, StoreError> {
        if let Some(statement) = self.statements.borrow().get(sql) {
            return Ok(statement.clone());
        }
        let statement = self.client.borrow_mut().prepare(&to_postgres(sql))?;
        let mut statements = self.statements.borrow_mut();
        if statements.len() >= PG_STATEMENTS_KEPT {
            statements.clear();
        }
        statements.insert(sql.to_owned(), statement.clone());
        Ok(statement)
    }

    fn query(
        &self,
        statement: &postgres::Statement,
        args: &[&dyn ToSql],
    ) -> Result<Vec<postgres::Row>, StoreError> {
        with_pg_args(args, |args| {
            Ok(self.client.borrow_mut().query(statement, args)?)
        })
    }

    fn execute(
        &self,
        statement: &postgres::Statement,
        args: &[&dyn ToSql],
    ) -> Result<usize, StoreError> {
        with_pg_args(args, |args| {
            Ok(self.client.borrow_mut().execute(statement, args)? as usize)
        })
    }
}

impl Db {
    pub fn is_postgres(&self) -> bool {
        matches!(self, Db::Postgres(_))
    }

    /// The SQLite connection, for tests that look at what only SQLite has (pragmas).
    #[cfg(test)]
    pub fn sqlite(&self) -> Option<&rusqlite::Connection> {
        match self {
            Db::Sqlite(conn) => Some(conn),
            Db::Postgres(_) => None,
        }
    }

    /// An SQL expression for the store's own clock in Unix milliseconds: what every node of
    /// a shared store agrees on, whatever its own clock says.
    pub fn clock_ms_sql(&self) -> &'static str {
        match self {
            Db::Sqlite(_) => "CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)",
            Db::Postgres(_) => "CAST(extract(epoch FROM clock_timestamp()) * 1000 AS BIGINT)",
        }
    }

    /// Run one statement; how many rows it changed.
    pub fn execute(&self, sql: &str, args: impl Args) -> Result<usize, StoreError> {
        args.with(|args| match self {
            Db::Sqlite(conn) => Ok(conn.execute(sql, args)?),
            Db::Postgres(pg) => pg.execute(&pg.statement(sql)?, args),
        })
    }

    /// Run statements without parameters, separated by `;`.
    pub fn execute_batch(&self, sql: &str) -> Result<(), StoreError> {
        match self {
            Db::Sqlite(conn) => Ok(conn.execute_batch(sql)?),
            Db::Postgres(pg) => Ok(pg.client.borrow_mut().batch_execute(sql)?),
        }
    }

    /// The first row of a query, read by `read` ([`StoreError::NoRow`] when there is none).
    pub fn query_row<T>(
        &self,
        sql: &str,
        args: impl Args,
        read: impl FnOnce(&Row<'_>) -> rusqlite::Result<T>,
    ) -> Result<T, StoreError> {
        self.prepare(sql)?.query_row(args, read)
    }

    /// A statement kept prepared for the next call with the same SQL.
    pub fn prepare_cached(&self, sql: &str) -> Result<Stmt<'_>, StoreError> {
        Ok(Stmt(match self {
            Db::Sqlite(conn) => StmtInner::SqliteCached(conn.prepare_cached(sql)?),
            Db::Postgres(pg) => StmtInner::Postgres(pg, pg.statement(sql)?),
        }))
    }

    /// A statement for SQL that is rarely the same twice (SQLite does not keep it).
    pub fn prepare(&self, sql: &str) -> Result<Stmt<'_>, StoreError> {
        Ok(Stmt(match self {
            Db::Sqlite(conn) => StmtInner::Sqlite(conn.prepare(sql)?),
            Db::Postgres(pg) => StmtInner::Postgres(pg, pg.statement(sql)?),
        }))
    }

    /// Begin a transaction: it commits with [`Tx::commit`] and rolls back when dropped.
    pub fn transaction(&mut self) -> Result<Tx<'_>, StoreError> {
        self.execute_batch("BEGIN")?;
        Ok(Tx {
            db: self,
            open: true,
        })
    }

    /// The id the last insert into a table with a generated id gave its row.
    pub fn last_insert_rowid(&self) -> Result<i64, StoreError> {
        match self {
            Db::Sqlite(conn) => Ok(conn.last_insert_rowid()),
            Db::Postgres(_) => self.query_row("SELECT lastval()", params0(), |r| r.get(0)),
        }
    }
}

/// No parameters (`[]` alone leaves its element type unknown).
pub fn params0() -> [&'static dyn ToSql; 0] {
    []
}

/// An open transaction; derefs to the connection for its statements.
pub struct Tx<'c> {
    db: &'c mut Db,
    open: bool,
}

impl Tx<'_> {
    pub fn commit(mut self) -> Result<(), StoreError> {
        // Whether the COMMIT fails or not, the transaction is over (a failed one is rolled
        // back by the drop, as rusqlite does).
        let result = self.db.execute_batch("COMMIT");
        self.open = result.is_err();
        result
    }
}

impl Deref for Tx<'_> {
    type Target = Db;
    fn deref(&self) -> &Db {
        self.db
    }
}

impl Drop for Tx<'_> {
    fn drop(&mut self) {
        if self.open
            && let Err(e) = self.db.execute_batch("ROLLBACK")
        {
            tracing::error!(error = %e, "store: could not roll a transaction back");
        }
    }
}

/// A prepared statement.
pub struct Stmt<'c>(StmtInner<'c>);

enum StmtInner<'c> {
    SqliteCached(rusqlite::CachedStatement<'c>),
    Sqlite(rusqlite::Statement<'c>),
    Postgres(&'c Pg, postgres::Statement),
}

/// What a statement runs on.
enum Target<'s, 'c> {
    Sqlite(&'s mut rusqlite::Statement<'c>),
    Postgres(&'c Pg, &'s postgres::Statement),
}

impl<'c> Stmt<'c> {
    fn target(&mut self) -> Target<'_, 'c> {
        match &mut self.0 {
            StmtInner::SqliteCached(stmt) => Target::Sqlite(stmt),
            StmtInner::Sqlite(stmt) => Target::Sqlite(stmt),
            StmtInner::Postgres(pg, statement) => Target::Postgres(pg, statement),
        }
    }

    pub fn execute(&mut self, args: impl Args) -> Result<usize, StoreError> {
        args.with(|args| match self.target() {
            Target::Postgres(pg, statement) => pg.execute(statement, args),
            Target::Sqlite(stmt) => Ok(stmt.execute(args)?),
        })
    }

    /// The first row, read by `read` ([`StoreError::NoRow`] when there is none).
    pub fn query_row<T>(
        &mut self,
        args: impl Args,
        read: impl FnOnce(&Row<'_>) -> rusqlite::Result<T>,
    ) -> Result<T, StoreError> {
        args.with(|args| match self.target() {
            Target::Postgres(pg, statement) => {
                let rows = pg.query(statement, args)?;
                let first = rows.first().ok_or(StoreError::NoRow)?;
                Ok(read(&Row(RowInner::Postgres(first)))?)
            }
            Target::Sqlite(stmt) => {
                match stmt.query_row(args, |r| read(&Row(RowInner::Sqlite(r)))) {
                    Err(rusqlite::Error::QueryReturnedNoRows) => Err(StoreError::NoRow),
                    other => Ok(other?),
                }
            }
        })
    }

    /// Every row, each read by `read`.
    pub fn query_map<T>(
        &mut self,
        args: impl Args,
        mut read: impl FnMut(&Row<'_>) -> rusqlite::Result<T>,
    ) -> Result<std::vec::IntoIter<rusqlite::Result<T>>, StoreError> {
        args.with(|args| match self.target() {
            Target::Postgres(pg, statement) => Ok(pg
                .query(statement, args)?
                .iter()
                .map(|r| read(&Row(RowInner::Postgres(r))))
                .collect::<Vec<_>>()
                .into_iter()),
            Target::Sqlite(stmt) => {
                let rows = stmt.query_map(args, |r| read(&Row(RowInner::Sqlite(r))))?;
                Ok(rows.collect::<Vec<_>>().into_iter())
            }
        })
    }

    /// Read rows one at a time until `read` breaks: SQLite stops stepping there, so a
    /// long result is not read whole when only its start is wanted.
    pub fn for_each_row(
        &mut self,
        args: impl Args,
        mut read: impl FnMut(&Row<'_>) -> rusqlite::Result<ControlFlow<()>>,
    ) -> Result<(), StoreError> {
        args.with(|args| match self.target() {
            Target::Postgres(pg, statement) => {
                for row in pg.query(statement, args)? {
                    if read(&Row(RowInner::Postgres(&row)))?.is_break() {
                        break;
                    }
                }
                Ok(())
            }
            Target::Sqlite(stmt) => {
                let mut rows = stmt.query(args)?;
                while let Some(row) = rows.next()? {
                    if read(&Row(RowInner::Sqlite(row)))?.is_break() {
                        break;
                    }
                }
                Ok(())
            }
        })
    }
}

/// A row of a result.
pub struct Row<'r>(RowInner<'r>);

enum RowInner<'r> {
    Sqlite(&'r rusqlite::Row<'r>),
    Postgres(&'r postgres::Row),
}

impl Row<'_> {
    /// The value of a column (by position or name), as SQLite would hand it out.
    pub fn get<I: ColumnIndex, T: FromSql>(&self, column: I) -> rusqlite::Result<T> {
        match &self.0 {
            RowInner::Sqlite(row) => row.get(column),
            RowInner::Postgres(row) => {
                let Some(i) = column.position(row.columns()) else {
                    return Err(column.missing());
                };
                let value = pg_value(row, i)?;
                T::column_result(value).map_err(|e| match e {
                    FromSqlError::InvalidType => rusqlite::Error::InvalidColumnType(
                        i,
                        row.columns()[i].name().to_owned(),
                        value.data_type(),
                    ),
                    FromSqlError::OutOfRange(n) => rusqlite::Error::IntegralValueOutOfRange(i, n),
                    other => rusqlite::Error::FromSqlConversionFailure(
                        i,
                        value.data_type(),
                        other.into(),
                    ),
                })
            }
        }
    }
}

/// A column by position (`usize`) or by name (`&str`).
pub trait ColumnIndex: rusqlite::RowIndex + Copy {
    fn position(self, columns: &[postgres::Column]) -> Option<usize>;
    fn missing(self) -> rusqlite::Error;
}

impl ColumnIndex for usize {
    fn position(self, columns: &[postgres::Column]) -> Option<usize> {
        (self < columns.len()).then_some(self)
    }
    fn missing(self) -> rusqlite::Error {
        rusqlite::Error::InvalidColumnIndex(self)
    }
}

impl ColumnIndex for &str {
    fn position(self, columns: &[postgres::Column]) -> Option<usize> {
        columns.iter().position(|c| c.name() == self)
    }
    fn missing(self) -> rusqlite::Error {
        rusqlite::Error::InvalidColumnName(self.to_owned())
    }
}

/// A PostgreSQL column's value as one of SQLite's kinds.
fn pg_value(row: &postgres::Row, i: usize) -> rusqlite::Result<ValueRef<'_>> {
    let ty = row.columns()[i].type_();
    let failed = |e: Box<dyn std::error::Error + Send + Sync>| {
        rusqlite::Error::FromSqlConversionFailure(i, rusqlite::types::Type::Null, e)
    };
    let int = |v: Option<i64>| v.map_or(ValueRef::Null, ValueRef::Integer);
    Ok(if *ty == Type::INT8 {
        int(row
            .try_get::<_, Option<i64>>(i)
            .map_err(|e| failed(e.into()))?)
    } else if *ty == Type::INT4 {
        int(row
            .try_get::<_, Option<i32>>(i)
            .map_err(|e| failed(e.into()))?
            .map(i64::from))
    } else if *ty == Type::INT2 {
        int(row
            .try_get::<_, Option<i16>>(i)
            .map_err(|e| failed(e.into()))?
            .map(i64::from))
    } else if *ty == Type::BOOL {
        int(row
            .try_get::<_, Option<bool>>(i)
            .map_err(|e| failed(e.into()))?
            .map(i64::from))
    } else if *ty == Type::FLOAT8 || *ty == Type::FLOAT4 {
        let v = if *ty == Type::FLOAT8 {
            row.try_get::<_, Option<f64>>(i)
        } else {
            row.try_get::<_, Option<f32>>(i).map(|v| v.map(f64::from))
        };
        v.map_err(|e| failed(e.into()))?
            .map_or(ValueRef::Null, ValueRef::Real)
    } else if *ty == Type::BYTEA {
        row.try_get::<_, Option<&[u8]>>(i)
            .map_err(|e| failed(e.into()))?
            .map_or(ValueRef::Null, ValueRef::Blob)
    } else if *ty == Type::TEXT || *ty == Type::VARCHAR || *ty == Type::BPCHAR || *ty == Type::NAME
    {
        row.try_get::<_, Option<&str>>(i)
            .map_err(|e| failed(e.into()))?
            .map_or(ValueRef::Null, |s| ValueRef::Text(s.as_bytes()))
    } else {
        return Err(failed(
            format!("the store reads no PostgreSQL column of type {ty} (cast it in the query)")
                .into(),
        ));
    })
}

/// A statement's parameters: `params![…]`, a slice of them, or an array of one type.
pub trait Args {
    fn with<R>(self, f: impl FnOnce(&[&dyn ToSql]) -> R) -> R;
}

impl Args for &[&dyn ToSql] {
    fn with<R>(self, f: impl FnOnce(&[&dyn ToSql]) -> R) -> R {
        f(self)
    }
}

impl<const N: usize> Args for &[&dyn ToSql; N] {
    fn with<R>(self, f: impl FnOnce(&[&dyn ToSql]) -> R) -> R {
        f(self)
    }
}

impl<T: ToSql, const N: usize> Args for [T; N] {
    fn with<R>(self, f: impl FnOnce(&[&dyn ToSql]) -> R) -> R {
        let args = self.each_ref().map(|arg| arg as &dyn ToSql);
        f(&args)
    }
}

/// SQLite's values bound to PostgreSQL's parameters: each converted to the type PostgreSQL
/// inferred for its parameter (an integer to `bigint`, `integer` or `boolean`, text to
/// `text`), or refused with the two types named.
fn with_pg_args<R>(
    args: &[&dyn ToSql],
    f: impl FnOnce(&[&(dyn postgres::types::ToSql + Sync)]) -> Result<R, StoreError>,
) -> Result<R, StoreError> {
    let outputs = args
        .iter()
        .map(|arg| arg.to_sql())
        .collect::<rusqlite::Result<Vec<_>>>()?;
    let values = outputs
        .iter()
        .map(|out| match out {
            ToSqlOutput::Borrowed(v) => Ok(PgArg(*v)),
            ToSqlOutput::Owned(v) => Ok(PgArg(v.into())),
            _ => Err(StoreError::Invalid(
                "a parameter kind PostgreSQL is not given".into(),
            )),
        })
        .collect::<Result<Vec<_>, _>>()?;
    let refs: Vec<&(dyn postgres::types::ToSql + Sync)> = values
        .iter()
        .map(|v| v as &(dyn postgres::types::ToSql + Sync))
        .collect();
    f(&refs)
}

#[derive(Debug)]
struct PgArg<'a>(ValueRef<'a>);

impl postgres::types::ToSql for PgArg<'_> {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut bytes::BytesMut,
    ) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        let text = |ty: &Type| {
            *ty == Type::TEXT
                || *ty == Type::VARCHAR
                || *ty == Type::BPCHAR
                || *ty == Type::NAME
                || *ty == Type::UNKNOWN
        };
        match self.0 {
            ValueRef::Null => Ok(IsNull::Yes),
            ValueRef::Integer(n) if *ty == Type::INT8 => PgToSql::to_sql(&n, ty, out),
            ValueRef::Integer(n) if *ty == Type::INT4 => {
                PgToSql::to_sql(&i32::try_from(n)?, ty, out)
            }
            ValueRef::Integer(n) if *ty == Type::INT2 => {
                PgToSql::to_sql(&i16::try_from(n)?, ty, out)
            }
            ValueRef::Integer(n) if *ty == Type::BOOL => PgToSql::to_sql(&(n != 0), ty, out),
            ValueRef::Integer(n) if *ty == Type::FLOAT8 => PgToSql::to_sql(&(n as f64), ty, out),
            ValueRef::Integer(n) if text(ty) => {
                PgToSql::to_sql(&n.to_string().as_str(), &Type::TEXT, out)
            }
            ValueRef::Real(x) if *ty == Type::FLOAT8 => PgToSql::to_sql(&x, ty, out),
            ValueRef::Real(x) if *ty == Type::FLOAT4 => PgToSql::to_sql(&(x as f32), ty, out),
            ValueRef::Text(s) if text(ty) => {
                PgToSql::to_sql(&std::str::from_utf8(s)?, &Type::TEXT, out)
            }
            ValueRef::Blob(b) if *ty == Type::BYTEA => PgToSql::to_sql(&b, ty, out),
            other => Err(format!(
                "a {:?} value cannot be bound to a PostgreSQL parameter of type {ty}",
                other.data_type()
            )
            .into()),
        }
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    to_sql_checked!();
}

/// The statement in PostgreSQL's spelling: `?N` parameters become `$N` (a bare `?` the next
/// number), outside quoted strings and names.
pub fn to_postgres(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len() + 8);
    let mut quote: Option<char> = None;
    let mut next = 0u32;
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => {
                quote = None;
                out.push(c);
            }
            (Some(_), c) => out.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                out.push(c);
            }
            (None, '?') => {
                let mut digits = String::new();
                while let Some(d) = chars.peek().filter(|d| d.is_ascii_digit()) {
                    digits.push(*d);
                    chars.next();
                }
                out.push('$');
                if digits.is_empty() {
                    next += 1;
                    out.push_str(&next.to_string());
                } else {
                    next = next.max(digits.parse().unwrap_or(0));
                    out.push_str(&digits);
                }
            }
            (None, c) => out.push(c),
        }
    }
    out
}

/// `.optional()` for the store's results: no row is `None`.
pub trait Optional<T> {
    fn optional(self) -> Result<Option<T>, StoreError>;
}

impl<T> Optional<T> for Result<T, StoreError> {
    fn optional(self) -> Result<Option<T>, StoreError> {
        match self {
            Ok(v) => Ok(Some(v)),
            Err(StoreError::NoRow) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_are_renumbered_for_postgres_outside_quotes() {
        assert_eq!(
            to_postgres("SELECT ?1, ?2 WHERE a = ?1 AND b = '?3' AND \"c?\" = ?"),
            "SELECT $1, $2 WHERE a = $1 AND b = '?3' AND \"c?\" = $3"
        );
        assert_eq!(to_postgres("VALUES (?, ?)"), "VALUES ($1, $2)");
    }
}
