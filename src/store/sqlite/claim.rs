//! The claim path: leasing the best pending URLs, host by host.

use super::columns::{int_col, operation_col, text_col};
use super::errors::Fail;
use super::schema::{
    CLAIM_UPDATE, EXPIRE_LEASES, EXTEND_LEASE, HOST_CANDIDATES, LAST_FETCH, LEASED_BY,
    PENDING_HOSTS, RELEASE_ID, RELEASE_KEY,
};
use crate::store::seen::{Seen, SeenWindow, key_hash};
use rusqlite::{OptionalExtension, Transaction, params};
use std::collections::{HashMap, HashSet};
use web_crawler_actors::LastFetch;
use web_crawler_actors::frontier_rules::round_robin;
use web_crawler_actors::{ClaimRequest, Job, Millis, OperationSpec, UrlKey, now_ms};

// --- claim ------------------------------------------------------------------

/// The credit a pending key gathered that its row does not show yet.
pub(super) fn unsaved_credit(seen: &SeenWindow, url: &str, operation: &OperationSpec) -> f64 {
    seen.get(key_hash(url, operation))
        .and_then(Seen::unsaved)
        .map_or(0.0, |(_, credit)| credit)
}

pub(super) fn apply_claim(
    tx: &Transaction<'_>,
    seen: &SeenWindow,
    req: &ClaimRequest,
) -> Result<Vec<Job>, Fail> {
    tx.prepare_cached(EXPIRE_LEASES)?.execute([req.now])?;
    if req.limit == 0 {
        return Ok(Vec::new());
    }
    let hosts: Vec<String> = tx
        .prepare_cached(PENDING_HOSTS)?
        .query_map([], |row| row.get(0))?
        .collect::<Result<_, _>>()?;
    // Per host, the best URLs it still has room for. The round-robin below
    // takes rank 1 of every host before rank 2 of any, so a fair share of the
    // limit is read first (reading each host's whole room would read and drop
    // most of it); if some hosts ran short, the others read up to what is
    // still missing, which is all the round-robin can take from any of them.
    let mut open: Vec<HostCandidates> = hosts
        .into_iter()
        .filter_map(|host| {
            let held = req.held_per_host.get(&host).copied().unwrap_or(0);
            let room = req.per_host_cap.saturating_sub(held).min(req.limit);
            (room > 0).then(|| HostCandidates {
                host,
                room,
                jobs: Vec::new(),
            })
        })
        .collect();
    let mut candidates = tx.prepare_cached(HOST_CANDIDATES)?;
    let share = req.limit.div_ceil(open.len().max(1));
    for h in &mut open {
        read_candidates(&mut candidates, h, req.now, share.min(h.room))?;
    }
    let missing = req
        .limit
        .saturating_sub(open.iter().map(|h| h.jobs.len()).sum());
    if missing > 0 {
        for h in &mut open {
            // A host that gave less than its share has nothing more.
            if h.jobs.len() == share.min(h.room) && h.jobs.len() < h.room {
                let want = h.room.min(h.jobs.len() + missing);
                read_candidates(&mut candidates, h, req.now, want)?;
            }
        }
    }
    let mut per_host: Vec<Vec<(i64, Job)>> = open
        .into_iter()
        .map(|h| h.jobs)
        .filter(|jobs| !jobs.is_empty())
        .collect();
    // Hosts with the most credit first; then rank 1 of every host before
    // rank 2 of any (each list is already within its host's room).
    per_host.sort_by(|a, b| b[0].1.priority.total_cmp(&a[0].1.priority));
    let mut rows: Vec<Option<(i64, Job)>> = per_host.into_iter().flatten().map(Some).collect();
    let order = round_robin(
        rows.iter()
            .enumerate()
            .map(|(i, r)| (i, r.as_ref().map_or("", |(_, j)| j.host.as_str()))),
        req.limit,
        usize::MAX,
        &HashMap::new(),
    );
    let mut chosen: Vec<(i64, Job)> = order.into_iter().filter_map(|i| rows[i].take()).collect();
    let mut update = tx.prepare_cached(CLAIM_UPDATE)?;
    let mut last = tx.prepare_cached(LAST_FETCH)?;
    for (id, job) in &mut chosen {
        update.execute(params![*id, req.lease_until, req.owner, req.now])?;
        job.priority += unsaved_credit(seen, &job.url, &job.operation);
        let fetched = last
            .query_row([&job.url], |row| {
                Ok(LastFetch {
                    http_returncode: row.get(0)?,
                    content_hash: row.get::<_, Option<i64>>(1)?.map(i64::cast_unsigned),
                    etag: row.get(2)?,
                    last_modified: row.get(3)?,
                    check_interval_ms: row.get(4)?,
                    check_every_ms: row.get(5)?,
                })
            })
            .optional()?;
        job.set_last(fetched);
    }
    Ok(chosen.into_iter().map(|(_, job)| job).collect())
}

/// One host's claim candidates: its best pending rows so far, and how many
/// it has room for.
struct HostCandidates {
    host: String,
    room: usize,
    jobs: Vec<(i64, Job)>,
}

/// Extend a host's candidates to its best `want`.
fn read_candidates(
    stmt: &mut rusqlite::CachedStatement<'_>,
    h: &mut HostCandidates,
    now: Millis,
    want: usize,
) -> Result<(), Fail> {
    let have = h.jobs.len();
    if want <= have {
        return Ok(());
    }
    let mut rows = stmt.query(params![h.host, now])?;
    let mut skipped = 0;
    while h.jobs.len() < want
        && let Some(row) = rows.next()?
    {
        // The rows it already has come first (same snapshot, same order).
        if skipped < have {
            skipped += 1;
            continue;
        }
        h.jobs.push((
            row.get::<_, i64>(0)?,
            Job {
                url: row.get(1)?,
                operation: operation_col(row, 2, "pending_urls")?,
                host: text_col(row, 3)?,
                depth: int_col(row, 4, "depth")?,
                priority: row.get::<_, Option<f64>>(5)?.unwrap_or(0.0),
                attempts: int_col(row, 6, "attempts")?,
                redirect_hops: int_col(row, 7, "redirect_hops")?,
                last: None,
                check_every_ms: row.get(8)?,
            },
        ));
    }
    Ok(())
}

// --- leases -----------------------------------------------------------------

pub(super) fn extend_leases(
    tx: &Transaction<'_>,
    keys: &[UrlKey],
    owner: &str,
    until: Millis,
) -> Result<(), Fail> {
    let mut stmt = tx.prepare_cached(EXTEND_LEASE)?;
    for key in keys {
        stmt.execute(params![key.url, key.operation.key(), until, owner])?;
    }
    Ok(())
}

/// Return `owner`'s leases to the frontier, all but those in `keep`.
pub(super) fn release(
    tx: &Transaction<'_>,
    owner: &str,
    keep: &HashSet<(String, String)>,
) -> Result<u64, Fail> {
    // Filtered in Rust: `keep` is small and exact-match on the stored
    // key text, which is what the unique index holds.
    let ids: Vec<i64> = {
        let mut stmt = tx.prepare_cached(LEASED_BY)?;
        let mut rows = stmt.query([owner])?;
        let mut ids = Vec::new();
        while let Some(row) = rows.next()? {
            let key: (String, String) = (row.get(1)?, row.get(2)?);
            if !keep.contains(&key) {
                ids.push(row.get(0)?);
            }
        }
        ids
    };
    let now = now_ms();
    let mut stmt = tx.prepare_cached(RELEASE_ID)?;
    for id in &ids {
        stmt.execute(params![id, now])?;
    }
    Ok(ids.len() as u64)
}

pub(super) fn release_keys(tx: &Transaction<'_>, keys: &[UrlKey]) -> Result<u64, Fail> {
    let now = now_ms();
    let mut stmt = tx.prepare_cached(RELEASE_KEY)?;
    let mut released = 0u64;
    for key in keys {
        released += stmt.execute(params![key.url, key.operation.key(), now])? as u64;
    }
    Ok(released)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::sqlite::test_support::*;
    use web_crawler_actors::{Frontier, Queries};

    #[tokio::test]
    async fn claim_caps_per_host_and_round_robins_across_hosts() {
        let (_dir, _path, store) = open_temp();
        store
            .commit(
                (seeds(
                    0,
                    vec![
                        link("http://a/1", 0, 1.0),
                        link("http://a/2", 0, 5.0),
                        link("http://a/3", 0, 3.0),
                        link("http://a/4", 0, 1.0),
                        link("http://b/1", 0, 2.0),
                        link("http://b/2", 0, 2.0),
                        link("http://b/3", 0, 0.5),
                        link("http://c/1", 0, 0.1),
                        link("http://d/1", 0, 9.0),
                    ],
                ))
                .into(),
            )
            .await
            .unwrap();
        let mut req = claim_req(10, 100, 2);
        req.held_per_host = HashMap::from([("a".to_string(), 1), ("d".to_string(), 2)]);
        let jobs = store.claim(req).await.unwrap();
        let urls: Vec<&str> = jobs.iter().map(|j| j.url.as_str()).collect();
        // Rank 1 of a, b, c (by priority), then rank 2 of b (FIFO tiebreak);
        // a has room for one more, d for none.
        assert_eq!(
            urls,
            vec!["http://a/2", "http://b/1", "http://c/1", "http://b/2"]
        );
        assert!(jobs.iter().all(|j| j.attempts == 0 && j.depth == 0));

        // The limit cuts the round-robin order, not one host's queue.
        let jobs = store.claim(claim_req(20, 2, 10)).await.unwrap();
        let urls: Vec<&str> = jobs.iter().map(|j| j.url.as_str()).collect();
        assert_eq!(urls, vec!["http://d/1", "http://a/3"]);

        let counts = store.counts().await.unwrap();
        assert_eq!((counts.pending, counts.processing), (3, 6));
        let p = store.pending(100).await.unwrap();
        let claimed = p.iter().find(|p| p.url == "http://a/2").unwrap();
        assert_eq!(claimed.status, "processing");
        assert_eq!(claimed.lease_until, Some(60_010));
        assert_eq!(claimed.d_change, 10);
    }

    #[tokio::test]
    async fn release_returns_all_but_kept_and_extend_needs_owner() {
        let (_dir, _path, store) = open_temp();
        let links = (0..4)
            .map(|i| link(&format!("http://a/{i}"), 0, 1.0))
            .collect();
        store.commit((seeds(0, links)).into()).await.unwrap();
        assert_eq!(store.claim(claim_req(0, 10, 10)).await.unwrap().len(), 4);

        store
            .extend_leases(&[key("http://a/0")], "someone else", 999_999)
            .await
            .unwrap();
        store
            .extend_leases(&[key("http://a/1")], OWNER, 999_999)
            .await
            .unwrap();
        let leases: HashMap<String, Option<Millis>> = store
            .pending(10)
            .await
            .unwrap()
            .into_iter()
            .map(|p| (p.url, p.lease_until))
            .collect();
        assert_eq!(leases["http://a/0"], Some(60_000));
        assert_eq!(leases["http://a/1"], Some(999_999));

        assert_eq!(store.release("someone else", &[]).await.unwrap(), 0);
        let released = store
            .release(OWNER, &[key("http://a/1"), key("http://a/3")])
            .await
            .unwrap();
        assert_eq!(released, 2);
        let counts = store.counts().await.unwrap();
        assert_eq!((counts.pending, counts.processing), (2, 2));
        for p in store.pending(10).await.unwrap() {
            if p.status == "pending" {
                assert_eq!(p.lease_until, None);
            }
        }

        // release_keys only moves processing rows.
        let n = store
            .release_keys(&[key("http://a/0"), key("http://a/1"), key("http://nope/")])
            .await
            .unwrap();
        assert_eq!(n, 1);
        let counts = store.counts().await.unwrap();
        assert_eq!((counts.pending, counts.processing), (3, 1));
    }
}
