//! Column values read and written with the checks the store's data needs:
//! integers that must fit, NULLs read as defaults, JSON lists and
//! operation keys that must parse.

use super::errors::Fail;
use rusqlite::Row;
use web_crawler_actors::OperationSpec;

pub(super) fn to_i64<T: TryInto<i64>>(value: T, what: &str) -> Result<i64, Fail> {
    value
        .try_into()
        .map_err(|_| Fail::Invalid(format!("{what} does not fit in a 64-bit signed integer")))
}

/// NULL reads as 0, so rows written by hand or by an older run still load.
pub(super) fn int_col<T: TryFrom<i64>>(row: &Row<'_>, idx: usize, what: &str) -> Result<T, Fail> {
    let v: i64 = row.get::<_, Option<i64>>(idx)?.unwrap_or(0);
    T::try_from(v).map_err(|_| Fail::Corrupt(format!("{what} = {v} is out of range")))
}

pub(super) fn opt_int_col<T: TryFrom<i64>>(
    row: &Row<'_>,
    idx: usize,
    what: &str,
) -> Result<Option<T>, Fail> {
    match row.get::<_, Option<i64>>(idx)? {
        None => Ok(None),
        Some(v) => T::try_from(v)
            .map(Some)
            .map_err(|_| Fail::Corrupt(format!("{what} = {v} is out of range"))),
    }
}

pub(super) fn text_col(row: &Row<'_>, idx: usize) -> Result<String, Fail> {
    Ok(row.get::<_, Option<String>>(idx)?.unwrap_or_default())
}

pub(super) fn operation_col(row: &Row<'_>, idx: usize, table: &str) -> Result<OperationSpec, Fail> {
    let key: String = row.get(idx)?;
    OperationSpec::from_key(&key).ok_or_else(|| {
        Fail::Corrupt(format!(
            "{table}.operation {key:?} is not a JSON array of strings"
        ))
    })
}

/// A JSON list column; NULL or empty text reads as the empty list. `parse`
/// is `serde_json::from_str` at the concrete type (keeps serde out of the deps).
pub(super) fn json_col<T>(
    row: &Row<'_>,
    idx: usize,
    what: &str,
    parse: impl Fn(&str) -> serde_json::Result<Vec<T>>,
) -> Result<Vec<T>, Fail> {
    match row.get::<_, Option<String>>(idx)? {
        None => Ok(Vec::new()),
        Some(s) if s.trim().is_empty() => Ok(Vec::new()),
        Some(s) => parse(&s)
            .map_err(|e| Fail::Corrupt(format!("{what} is not the expected JSON list: {e}"))),
    }
}

pub(super) fn json_err(e: serde_json::Error) -> Fail {
    Fail::Invalid(format!("cannot encode as JSON: {e}"))
}
