//! One crawling master per MongoDB database. Two masters on one database
//! would claim each other's URLs and double each host's load; the embedded
//! store has an OS file lock for that ([`crate::store::WriterLock`]), a database
//! shared over the network needs a lease: the document `_id: "frontier"`
//! of the `crawl_owner` collection names the process that drives the
//! frontier and until when ([`LEASE_MS`]); that process renews it every
//! [`RENEW_MS`] and deletes it when its app stops.
//!
//! A process that finds the lease held waits: a holder that is alive renews
//! it within [`RENEW_MS`], and the newcomer is refused with a line naming
//! it; a holder that crashed (`kill -9`, a lost machine) stops renewing,
//! and its lease runs out within [`LEASE_MS`], after which the newcomer
//! takes over. The rule is [`verdict`], a pure function of what was seen.

use super::errors::is_duplicate_key;
use mongodb::bson::{Document, doc, oid::ObjectId};
use mongodb::{Collection, Database};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use web_crawler_actors::{Millis, StoreError, now_ms};

/// How long a lease lasts without renewal: the longest a crash keeps the
/// next master waiting.
pub(crate) const LEASE_MS: Millis = 15_000;
/// How often the holder renews its lease.
pub(crate) const RENEW_MS: Millis = 3_000;
/// How long a stopping app tries to delete its lease.
const RELEASE_WAIT: Duration = Duration::from_secs(2);
/// How often a waiting newcomer looks again.
const POLL_MS: Millis = 500;

const COLLECTION: &str = "crawl_owner";
const ID: &str = "frontier";

/// The owner document as read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Holder {
    /// Unique per process (an ObjectId's hex).
    pub(crate) token: String,
    /// Who, in words: host, process id, node name.
    pub(crate) owner: String,
    pub(crate) d_since: Millis,
    pub(crate) d_renewed: Millis,
    pub(crate) lease_until: Millis,
}

/// What a process that wants the frontier does next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    Take,
    /// Look again later: the holder may have crashed.
    Wait,
    /// The holder is alive: it renewed (or another process took over)
    /// while this one waited.
    Refuse,
}

/// `current`: the lease now; `first_seen`: the lease when this process
/// first found it held.
pub(crate) fn verdict(
    token: &str,
    now: Millis,
    current: Option<&Holder>,
    first_seen: Option<&Holder>,
) -> Verdict {
    let Some(current) = current else {
        return Verdict::Take;
    };
    if current.token == token || current.lease_until <= now {
        return Verdict::Take;
    }
    match first_seen {
        Some(first) if first.token != current.token || first.d_renewed < current.d_renewed => {
            Verdict::Refuse
        }
        _ => Verdict::Wait,
    }
}

fn held_by(holder: &Holder) -> StoreError {
    StoreError::Backend {
        context: format!(
            "another web_crawler master is crawling with this MongoDB database ({}, since {}): \
             stop it, or give this crawl another --mongodb-database",
            holder.owner,
            web_crawler_actors::outage::utc_time(holder.d_since)
        ),
        source: "the database's owner lease is held".into(),
    }
}

/// This process's lease on a database's frontier, renewed in the
/// background until [`OwnerLease::release`] (or the process ends).
#[derive(Debug)]
pub(crate) struct OwnerLease {
    owners: Collection<Document>,
    token: String,
    /// Set when another process holds the lease now: this one must stop.
    lost: Arc<Mutex<Option<Holder>>>,
    renewal: tokio::task::JoinHandle<()>,
}

impl Drop for OwnerLease {
    fn drop(&mut self) {
        self.renewal.abort();
    }
}

impl OwnerLease {
    /// Take the lease of `db`'s frontier for `owner` (words for the
    /// message another process prints), waiting out a crashed holder's.
    pub(crate) async fn acquire(
        db: &Database,
        owner: String,
        backend: fn(mongodb::error::Error) -> StoreError,
    ) -> Result<Self, StoreError> {
        let owners: Collection<Document> = db.collection(COLLECTION);
        let token = ObjectId::new().to_hex();
        let mut first_seen: Option<Holder> = None;
        let started = now_ms();
        loop {
            let now = now_ms();
            let current = read(&owners).await.map_err(backend)?;
            match verdict(&token, now, current.as_ref(), first_seen.as_ref()) {
                Verdict::Take => {
                    if take(&owners, &token, &owner, now, current.as_ref())
                        .await
                        .map_err(backend)?
                    {
                        break;
                    }
                    // Another newcomer was faster: look again.
                }
                Verdict::Refuse => {
                    return Err(held_by(current.as_ref().expect("refused for a holder")));
                }
                Verdict::Wait => {
                    let current = current.expect("waiting for a holder");
                    // A lease further off than one period: a clock far
                    // ahead, or a holder that renews beyond the rule; it is
                    // alive as far as this process can tell.
                    if now.saturating_sub(started) > LEASE_MS + RENEW_MS {
                        return Err(held_by(&current));
                    }
                    if first_seen.is_none() {
                        tracing::warn!(
                            "the MongoDB database's owner lease is held by {} (renewed {} s ago); \
                             waiting up to {} s: a crashed master's lease runs out by then",
                            current.owner,
                            now.saturating_sub(current.d_renewed) / 1000,
                            (current.lease_until.saturating_sub(now) + 999) / 1000
                        );
                        first_seen = Some(current);
                    }
                    tokio::time::sleep(Duration::from_millis(POLL_MS.unsigned_abs())).await;
                }
            }
        }
        let lost = Arc::new(Mutex::new(None));
        let renewal = tokio::spawn(renew(
            owners.clone(),
            token.clone(),
            owner,
            Arc::clone(&lost),
        ));
        Ok(Self {
            owners,
            token,
            lost,
            renewal,
        })
    }

    /// An error if another process holds the lease now.
    pub(crate) fn check(&self) -> Result<(), StoreError> {
        match &*self.lost.lock().unwrap_or_else(|p| p.into_inner()) {
            None => Ok(()),
            Some(holder) => Err(StoreError::refused(
                format!(
                    "another web_crawler master took this MongoDB database over ({}) \
                     while this one could not renew its lease",
                    holder.owner
                ),
                "the database's owner lease is lost",
            )),
        }
    }

    /// Stop renewing and delete the lease, so the next master starts at once.
    pub(crate) async fn release(&self) {
        self.renewal.abort();
        // A store that went away is not waited for: the lease runs out.
        let deleted = tokio::time::timeout(
            RELEASE_WAIT,
            self.owners
                .delete_one(doc! { "_id": ID, "token": &self.token }),
        )
        .await;
        let why = match deleted {
            Ok(Ok(_)) => return,
            Ok(Err(e)) => e.to_string(),
            Err(_) => "no answer".to_string(),
        };
        tracing::warn!(
            "could not release the MongoDB database's owner lease ({why}); \
             it runs out within {} s",
            LEASE_MS / 1000
        );
    }
}

async fn read(owners: &Collection<Document>) -> mongodb::error::Result<Option<Holder>> {
    let Some(d) = owners.find_one(doc! { "_id": ID }).await? else {
        return Ok(None);
    };
    let text = |k: &str| d.get_str(k).unwrap_or_default().to_string();
    let millis = |k: &str| d.get_i64(k).unwrap_or(0);
    Ok(Some(Holder {
        token: text("token"),
        owner: text("owner"),
        d_since: millis("d_since"),
        d_renewed: millis("d_renewed"),
        lease_until: millis("lease_until"),
    }))
}

/// Take the lease seen as `current` (none, expired, or this process's own);
/// false if another process changed it first.
async fn take(
    owners: &Collection<Document>,
    token: &str,
    owner: &str,
    now: Millis,
    current: Option<&Holder>,
) -> mongodb::error::Result<bool> {
    let lease = doc! {
        "token": token,
        "owner": owner,
        "d_since": now,
        "d_renewed": now,
        "lease_until": now + LEASE_MS,
    };
    match current {
        None => {
            let mut first = lease;
            first.insert("_id", ID);
            match owners.insert_one(first).await {
                Ok(_) => Ok(true),
                Err(e) if is_duplicate_key(&e) => Ok(false),
                Err(e) => Err(e),
            }
        }
        // Only if it is still the document this process decided on.
        Some(seen) => {
            let r = owners
                .update_one(
                    doc! { "_id": ID, "token": &seen.token, "d_renewed": seen.d_renewed },
                    doc! { "$set": lease },
                )
                .await?;
            Ok(r.matched_count == 1)
        }
    }
}

/// Renew every [`RENEW_MS`]. A store that does not answer is the master's
/// to wait out; when it answers again the lease is renewed, or taken again
/// if it ran out meanwhile and nobody took it, or found lost.
async fn renew(
    owners: Collection<Document>,
    token: String,
    owner: String,
    lost: Arc<Mutex<Option<Holder>>>,
) {
    loop {
        tokio::time::sleep(Duration::from_millis(RENEW_MS.unsigned_abs())).await;
        let now = now_ms();
        let renewed = owners
            .update_one(
                doc! { "_id": ID, "token": &token },
                doc! { "$set": { "d_renewed": now, "lease_until": now + LEASE_MS } },
            )
            .await;
        match renewed {
            Ok(r) if r.matched_count == 1 => continue,
            Ok(_) => {}
            Err(e) => {
                tracing::debug!("renewing the owner lease: {e}");
                continue;
            }
        }
        // Not ours any more: taken again if nobody else has it.
        let current = match read(&owners).await {
            Ok(current) => current,
            Err(_) => continue,
        };
        match verdict(&token, now, current.as_ref(), None) {
            Verdict::Take => {
                if let Ok(true) = take(&owners, &token, &owner, now, current.as_ref()).await {
                    continue;
                }
            }
            Verdict::Wait | Verdict::Refuse => {}
        }
        if let Some(holder) = current.filter(|h| h.token != token) {
            tracing::error!(
                "the MongoDB database's owner lease was taken by {}: this master stops claiming",
                holder.owner
            );
            *lost.lock().unwrap_or_else(|p| p.into_inner()) = Some(holder);
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn holder(token: &str, renewed: Millis, until: Millis) -> Holder {
        Holder {
            token: token.into(),
            owner: format!("process {token}"),
            d_since: 0,
            d_renewed: renewed,
            lease_until: until,
        }
    }

    #[test]
    fn a_free_expired_or_own_lease_is_taken() {
        assert_eq!(verdict("me", 100, None, None), Verdict::Take);
        let expired = holder("other", 0, 100);
        assert_eq!(verdict("me", 100, Some(&expired), None), Verdict::Take);
        let mine = holder("me", 90, 1_000);
        assert_eq!(verdict("me", 100, Some(&mine), None), Verdict::Take);
    }

    #[test]
    fn a_live_lease_is_waited_on_until_it_runs_out() {
        let held = holder("other", 50, 1_000);
        assert_eq!(verdict("me", 100, Some(&held), None), Verdict::Wait);
        // Not renewed since first seen: the holder may be dead.
        assert_eq!(verdict("me", 900, Some(&held), Some(&held)), Verdict::Wait);
        assert_eq!(
            verdict("me", 1_000, Some(&held), Some(&held)),
            Verdict::Take
        );
    }

    #[test]
    fn a_renewal_or_a_new_holder_while_waiting_is_a_refusal() {
        let first = holder("other", 50, 1_000);
        let renewed = holder("other", 400, 1_400);
        assert_eq!(
            verdict("me", 500, Some(&renewed), Some(&first)),
            Verdict::Refuse
        );
        let third = holder("third", 450, 1_450);
        assert_eq!(
            verdict("me", 500, Some(&third), Some(&first)),
            Verdict::Refuse
        );
    }
}
