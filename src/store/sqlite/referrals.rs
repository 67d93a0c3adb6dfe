//! Who links to what: one link list per referring page.

use super::errors::Fail;
use super::schema::{ALL_REFERRERS, INSERT_REFERRER, REFERRER_LINKS, UPDATE_REFERRER};
use rusqlite::{OptionalExtension, Transaction, params};
use std::collections::HashMap;
use web_crawler_actors::NewLink;

// --- referrals --------------------------------------------------------------

/// A normalized URL as the referrers' link lists hold it. xxh3 is a fixed
/// algorithm, so stored values stay valid across builds.
fn url_hash(url: &str) -> i64 {
    xxhash_rust::xxh3::xxh3_64(url.as_bytes()).cast_signed()
}

fn decode_links(blob: &[u8]) -> Result<Vec<i64>, Fail> {
    if !blob.len().is_multiple_of(8) {
        return Err(Fail::Corrupt(format!(
            "a referrer's link list is {} bytes, not a multiple of 8",
            blob.len()
        )));
    }
    Ok(blob
        .chunks_exact(8)
        .map(|c| i64::from_le_bytes(c.try_into().expect("8 bytes")))
        .collect())
}

fn encode_links(mut hashes: Vec<i64>) -> Vec<u8> {
    hashes.sort_unstable();
    hashes.dedup();
    hashes.iter().flat_map(|h| h.to_le_bytes()).collect()
}

/// Add the URLs of `links` to `referrer`'s list.
pub(super) fn write_referrals<'a>(
    tx: &Transaction<'_>,
    referrer: &str,
    links: impl IntoIterator<Item = &'a NewLink>,
) -> Result<(), Fail> {
    let mut hashes: Vec<i64> = links.into_iter().map(|link| url_hash(&link.url)).collect();
    if hashes.is_empty() {
        return Ok(());
    }
    let existing: Option<(i64, Vec<u8>)> = tx
        .prepare_cached(REFERRER_LINKS)?
        .query_row([referrer], |row| Ok((row.get(0)?, row.get(1)?)))
        .optional()?;
    match existing {
        None => {
            tx.prepare_cached(INSERT_REFERRER)?
                .execute(params![referrer, encode_links(hashes)])?;
        }
        Some((id, blob)) => {
            let old = decode_links(&blob)?;
            hashes.retain(|h| old.binary_search(h).is_err());
            if !hashes.is_empty() {
                hashes.extend(old);
                tx.prepare_cached(UPDATE_REFERRER)?
                    .execute(params![id, encode_links(hashes)])?;
            }
        }
    }
    Ok(())
}

/// Who links to each of `urls` (sorted), by one pass over the link lists.
pub(super) fn referrals_of<'u>(
    tx: &Transaction<'_>,
    urls: impl IntoIterator<Item = &'u str>,
) -> Result<HashMap<String, Vec<String>>, Fail> {
    let mut wanted: HashMap<i64, Vec<String>> = HashMap::new();
    let mut names: Vec<(String, i64)> = Vec::new();
    for url in urls {
        let h = url_hash(url);
        wanted.entry(h).or_default();
        names.push((url.to_string(), h));
    }
    if !wanted.is_empty() {
        let mut stmt = tx.prepare_cached(ALL_REFERRERS)?;
        let mut rows = stmt.query([])?;
        while let Some(row) = rows.next()? {
            let links = decode_links(row.get_ref(1)?.as_blob().map_err(rusqlite::Error::from)?)?;
            let referrer: String = row.get(0)?;
            if wanted.len() < 8 {
                for (h, list) in wanted.iter_mut() {
                    if links.binary_search(h).is_ok() {
                        list.push(referrer.clone());
                    }
                }
            } else {
                for h in &links {
                    if let Some(list) = wanted.get_mut(h) {
                        list.push(referrer.clone());
                    }
                }
            }
        }
    }
    Ok(names
        .into_iter()
        .map(|(url, h)| {
            let mut list = wanted.get(&h).cloned().unwrap_or_default();
            list.sort();
            (url, list)
        })
        .collect())
}
