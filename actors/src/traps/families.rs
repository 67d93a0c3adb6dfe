//! The trap defence's families as an operator sees them: each refusal has
//! a rule ([`TrapRule`], a stable snake_case code) and names the family it
//! closed ([`TrapReason::family`]: the pattern, directory, query space or
//! host; one name per closed family). The guard hands out each closure it
//! makes ([`TrapGuard::take_closures`]), so the store keeps it; a master
//! that starts puts the stored ones back ([`TrapGuard::restore`]); an
//! operator who says a family is real lifts it for good
//! ([`TrapGuard::allow`]): an allowed family is never closed again.

use super::{Closure, Tracked};
use super::{
    KEY_DIRECTORY, KEY_HOST, KEY_PATTERN, KEY_QUERY_SPACE, TrapGuard, TrapReason, evict, key,
};
use crate::types::Millis;
use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use std::fmt;

/// Which trap rule refused a URL: the stable code the store, the reports
/// and `status` carry (a script never greps a sentence).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum TrapRule {
    /// Rule 1: a pattern's recent pages were nearly all near-duplicates.
    NearDuplicates,
    /// Rule 3: a pattern's near-duplicate pages linked only back into it.
    Barren,
    /// Rule 4: a path's query variants yielded near-duplicates.
    QuerySpace,
    /// Rule 5: a host on probation, outside the sections that proved new.
    HostProbation,
    /// A fetched page under another session id.
    SessionCopy,
    /// A link of a soft-404 page.
    #[serde(rename = "soft_404")]
    Soft404,
    /// Rule 6: a growing directory of pages that repeat their host's text.
    Stale,
}

impl TrapRule {
    pub const ALL: [TrapRule; 7] = [
        TrapRule::NearDuplicates,
        TrapRule::Barren,
        TrapRule::QuerySpace,
        TrapRule::HostProbation,
        TrapRule::SessionCopy,
        TrapRule::Soft404,
        TrapRule::Stale,
    ];

    /// Its stable code, as stored.
    pub fn code(self) -> &'static str {
        match self {
            TrapRule::NearDuplicates => "near_duplicates",
            TrapRule::Barren => "barren",
            TrapRule::QuerySpace => "query_space",
            TrapRule::HostProbation => "host_probation",
            TrapRule::SessionCopy => "session_copy",
            TrapRule::Soft404 => "soft_404",
            TrapRule::Stale => "stale",
        }
    }

    /// What kind of family the rule closes.
    pub fn scope(self) -> TrapScope {
        match self {
            TrapRule::NearDuplicates | TrapRule::Barren | TrapRule::SessionCopy => {
                TrapScope::Pattern
            }
            TrapRule::QuerySpace => TrapScope::QuerySpace,
            TrapRule::HostProbation | TrapRule::Soft404 => TrapScope::Host,
            TrapRule::Stale => TrapScope::Directory,
        }
    }
}

impl fmt::Display for TrapRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

impl std::str::FromStr for TrapRule {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        TrapRule::ALL
            .into_iter()
            .find(|rule| rule.code() == s)
            .ok_or_else(|| format!("{s:?} is not a trap rule"))
    }
}

/// What a family is: URLs of one pattern (`h/cal/{n}/{n}/`), one path's
/// query variants (`h/shop?`), one host (`h`), or one directory as written
/// (`h/tag/`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum TrapScope {
    Pattern,
    QuerySpace,
    Host,
    Directory,
}

impl TrapScope {
    pub fn code(self) -> &'static str {
        match self {
            TrapScope::Pattern => "pattern",
            TrapScope::QuerySpace => "query_space",
            TrapScope::Host => "host",
            TrapScope::Directory => "directory",
        }
    }
}

impl fmt::Display for TrapScope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

impl TrapReason {
    /// The rule that refused.
    pub fn rule(&self) -> TrapRule {
        match self {
            TrapReason::NearDuplicates { .. } => TrapRule::NearDuplicates,
            TrapReason::Barren { .. } => TrapRule::Barren,
            TrapReason::QuerySpace { .. } => TrapRule::QuerySpace,
            TrapReason::Host { .. } => TrapRule::HostProbation,
            TrapReason::SessionCopy { .. } => TrapRule::SessionCopy,
            TrapReason::Soft404 { .. } => TrapRule::Soft404,
            TrapReason::Stale { .. } => TrapRule::Stale,
        }
    }

    /// The family the refusal names, its identity (the store's key): a
    /// pattern (`h/cal/{n}/{n}/`, rules 1 and 3 and session copies), a
    /// path's query space (`h/shop?`), a host (`h:8080`: probation and
    /// soft 404s) or a directory as written (`h/tag/`). A name stands for
    /// everything of that name: allowing `h` lifts the host's probation
    /// and its soft 404s alike.
    pub fn family(&self) -> String {
        match self {
            TrapReason::NearDuplicates { pattern, .. }
            | TrapReason::Barren { pattern, .. }
            | TrapReason::SessionCopy { pattern } => pattern.clone(),
            TrapReason::QuerySpace { path, .. } => format!("{path}?"),
            TrapReason::Host { host, .. } | TrapReason::Soft404 { host } => host.clone(),
            TrapReason::Stale { directory, .. } => directory.clone(),
        }
    }

    /// The host (`host[:port]`) of its family.
    pub fn host(&self) -> &str {
        let name = match self {
            TrapReason::NearDuplicates { pattern, .. }
            | TrapReason::Barren { pattern, .. }
            | TrapReason::SessionCopy { pattern } => pattern,
            TrapReason::QuerySpace { path, .. } => path,
            TrapReason::Host { host, .. } | TrapReason::Soft404 { host } => host,
            TrapReason::Stale { directory, .. } => directory,
        };
        host_of_family(name)
    }
}

/// The host (`host[:port]`) a family's name starts with.
pub(super) fn host_of_family(family: &str) -> &str {
    family.split(['/', '?']).next().unwrap_or(family)
}

/// A family the guard closed: why, when, and how many of its pages it had
/// judged then (for a host on probation, its run of near-duplicates; for a
/// soft-404 host or a session copy, 1: the page that told).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrapClosure {
    pub reason: TrapReason,
    pub closed_at: Millis,
    pub pages: u32,
}

impl TrapClosure {
    pub fn family(&self) -> String {
        self.reason.family()
    }

    pub fn rule(&self) -> TrapRule {
        self.reason.rule()
    }
}

/// The families an operator allowed, and the closures made since the
/// owner last took them.
#[derive(Debug, Default)]
pub(super) struct Closings {
    allowed: HashSet<String>,
    new: Vec<TrapClosure>,
}

impl Closings {
    /// Whether `reason` may close its family at `now` (it is not allowed);
    /// if so the closure is kept for [`TrapGuard::take_closures`].
    pub(super) fn close(&mut self, reason: &TrapReason, pages: u32, now: Millis) -> bool {
        if !self.allowed.is_empty() && self.allowed.contains(&reason.family()) {
            return false;
        }
        self.new.push(TrapClosure {
            reason: reason.clone(),
            closed_at: now,
            pages,
        });
        true
    }

    /// Whether an operator allowed the family `name`.
    pub(super) fn allows(&self, name: &str) -> bool {
        !self.allowed.is_empty() && self.allowed.contains(name)
    }
}

impl TrapGuard {
    /// The closures made since the last call, oldest first.
    pub fn take_closures(&mut self) -> Vec<TrapClosure> {
        std::mem::take(&mut self.closings.new)
    }

    /// An operator says the family `name` is real: whatever closure of
    /// that name there is (a pattern, a query space, a directory, a host's
    /// probation, its soft 404s, session copies of a pattern) is lifted,
    /// and none is made again. Returns whether one was lifted.
    pub fn allow(&mut self, name: &str) -> bool {
        self.closings.allowed.insert(name.to_string());
        let mut lifted = false;
        let mut keys = vec![key(KEY_PATTERN, name), key(KEY_DIRECTORY, name)];
        if let Some(path) = name.strip_suffix('?') {
            keys.push(key(KEY_QUERY_SPACE, path));
        }
        for k in keys {
            if let Some(rec) = self.patterns.get_mut(&k)
                && rec
                    .closed
                    .as_ref()
                    .is_some_and(|c| c.reason.family() == name)
            {
                rec.lift();
                lifted = true;
            }
        }
        if let Some(host) = self.hosts.get_mut(&key(KEY_HOST, name))
            && host.probation.take().is_some()
        {
            host.run = 0;
            lifted = true;
        }
        lifted || self.soft_404s.contains_key(&key(KEY_HOST, name))
    }

    /// Undo [`TrapGuard::allow`] of a name that turned out to be no
    /// family (a typo): it may close as any other.
    pub fn disallow(&mut self, name: &str) {
        self.closings.allowed.remove(name);
    }

    /// Whether an operator allowed the family `name`.
    pub fn allows(&self, name: &str) -> bool {
        self.closings.allows(name)
    }

    /// A closure a previous master made (the store kept it): closed again
    /// at once, until it would have been lifted
    /// ([`TrapSettings::reopen_after_ms`](super::TrapSettings::reopen_after_ms)
    /// after it was made). One already lifted, one an operator allowed,
    /// and those that close nothing the guard keeps (a soft-404 host is
    /// probed again when its robots.txt is read; a session copy is a copy
    /// of a page the guard sees again) are left as they are. Not a new
    /// closure: [`TrapGuard::take_closures`] does not return it.
    pub fn restore(&mut self, closure: &TrapClosure, now: Millis) {
        let reason = &closure.reason;
        let until = self
            .cfg
            .reopen_after_ms
            .map(|d| closure.closed_at.saturating_add(d));
        if until.is_some_and(|until| now >= until) || self.allows(&reason.family()) {
            return;
        }
        let k = match reason {
            TrapReason::NearDuplicates { pattern, .. } | TrapReason::Barren { pattern, .. } => {
                key(KEY_PATTERN, pattern)
            }
            TrapReason::QuerySpace { path, .. } => key(KEY_QUERY_SPACE, path),
            TrapReason::Stale { directory, .. } => key(KEY_DIRECTORY, directory),
            TrapReason::Host { host, .. } => {
                let tick = self.next_tick();
                let state = self.hosts.entry(key(KEY_HOST, host)).or_default();
                state.used = tick;
                state.probation = Some(Closure {
                    reason: reason.clone(),
                    until,
                });
                evict(&mut self.hosts, self.cfg.max_hosts, |h| h.used);
                return;
            }
            TrapReason::SessionCopy { .. } | TrapReason::Soft404 { .. } => return,
        };
        let tick = self.next_tick();
        let rec: &mut Tracked = self.patterns.entry(k).or_default();
        rec.used = tick;
        rec.closed = Some(Closure {
            reason: reason.clone(),
            until,
        });
        evict(&mut self.patterns, self.cfg.max_patterns, |t| t.used);
    }
}

#[cfg(test)]
mod tests {
    use super::super::harness::{T0, close_items};
    use super::super::{Parts, TrapSettings, directory};
    use super::*;

    #[test]
    fn rules_have_stable_codes_and_scopes() {
        for rule in TrapRule::ALL {
            assert_eq!(rule.code().parse::<TrapRule>(), Ok(rule));
            let json = serde_json::to_string(&rule).unwrap();
            assert_eq!(json, format!("\"{}\"", rule.code()));
        }
        assert_eq!(TrapRule::Soft404.code(), "soft_404");
        assert_eq!(TrapRule::HostProbation.scope(), TrapScope::Host);
        assert_eq!(TrapRule::Stale.scope(), TrapScope::Directory);
        assert!("calendar".parse::<TrapRule>().is_err());
    }

    #[test]
    fn each_reason_names_its_rule_family_and_host() {
        let cases = [
            (
                TrapReason::NearDuplicates {
                    pattern: "h:81/cal/{n}/".into(),
                    near_dups: 22,
                    window: 24,
                },
                TrapRule::NearDuplicates,
                "h:81/cal/{n}/",
            ),
            (
                TrapReason::QuerySpace {
                    path: "h:81/shop".into(),
                    near_dups: 16,
                },
                TrapRule::QuerySpace,
                "h:81/shop?",
            ),
            (
                TrapReason::Host {
                    host: "h:81".into(),
                    run: 64,
                },
                TrapRule::HostProbation,
                "h:81",
            ),
            (
                TrapReason::Stale {
                    directory: "h:81/search?".into(),
                    stale: 24,
                    pages: 30,
                },
                TrapRule::Stale,
                "h:81/search?",
            ),
        ];
        for (reason, rule, family) in cases {
            assert_eq!(reason.rule(), rule);
            assert_eq!(reason.family(), family);
            assert_eq!(reason.host(), "h:81");
            // Stored as a document tagged by its rule, and read back.
            let json = serde_json::to_value(&reason).unwrap();
            assert_eq!(json["rule"], rule.code());
            assert_eq!(serde_json::from_value::<TrapReason>(json).unwrap(), reason);
        }
    }

    /// Rule 6's map key of a directory is the key of its name: a stored
    /// closure finds its record again.
    #[test]
    fn a_directory_is_keyed_by_its_name() {
        for url in [
            "http://h:81/tag/python+rust/",
            "http://h/3.12/c-api/arg.html",
            "http://h/search?q=a+b",
            "http://h/about",
            "http://h/a;jsessionid=x1/b",
        ] {
            assert_eq!(
                key(KEY_DIRECTORY, &directory(url)),
                Parts::of(url).directory_key(),
                "{url}"
            );
        }
    }

    #[test]
    fn closures_are_handed_out_once_each() {
        let mut g = TrapGuard::new(TrapSettings::default());
        close_items(&mut g);
        let closures = g.take_closures();
        assert_eq!(closures.len(), 1, "{closures:?}");
        assert_eq!(closures[0].rule(), TrapRule::Barren);
        assert_eq!(closures[0].family(), "t.test/item/{n}");
        assert_eq!((closures[0].closed_at, closures[0].pages), (T0, 17));
        assert!(g.take_closures().is_empty());
    }

    #[test]
    fn an_allowed_family_is_lifted_and_never_closed_again() {
        let mut g = TrapGuard::new(TrapSettings::default());
        close_items(&mut g);
        g.take_closures();
        assert!(g.admit("http://t.test/item/99", T0).is_err());
        assert!(g.allow("t.test/item/{n}"));
        assert_eq!(g.admit("http://t.test/item/99", T0), Ok(()));
        close_items(&mut g);
        assert_eq!(g.admit("http://t.test/item/99", T0), Ok(()));
        assert!(g.take_closures().is_empty(), "it never closes again");
        // A name that closes nothing lifts nothing; undone, it may close.
        assert!(!g.allow("t.test/other/{n}"));
        g.disallow("t.test/other/{n}");
        assert!(!g.allows("t.test/other/{n}"));
        assert!(g.allows("t.test/item/{n}"));
    }

    #[test]
    fn a_soft_404_host_and_session_copies_can_be_allowed() {
        let mut g = TrapGuard::new(TrapSettings::default());
        g.soft_404_probe("http://s.test/no-such-page-xq7", 7.into());
        assert!(g.soft_404("http://s.test/a", 7.into()).is_some());
        assert!(g.allow("s.test"), "its soft 404s are lifted");
        assert_eq!(g.soft_404("http://s.test/a", 7.into()), None);

        g.dispatched("http://m.test/p?sid=a81f3c9d0e1b");
        let copy = g.admit("http://m.test/p?sid=ffff3c9d0e1b", T0).unwrap_err();
        assert_eq!(copy.rule(), TrapRule::SessionCopy);
        g.allow(&copy.family());
        assert_eq!(g.admit("http://m.test/p?sid=ffff3c9d0e1b", T0), Ok(()));
    }

    #[test]
    fn a_stored_closure_refuses_at_once_until_it_would_have_lifted() {
        let day = TrapSettings::default().reopen_after_ms.unwrap();
        let mut first = TrapGuard::new(TrapSettings::default());
        close_items(&mut first);
        let closure = first.take_closures().remove(0);
        // A new master, a minute later, knows nothing until it is told.
        let mut g = TrapGuard::new(TrapSettings::default());
        let later = T0 + 60_000;
        assert_eq!(g.admit("http://t.test/item/7", later), Ok(()));
        g.restore(&closure, later);
        let refused = g.admit("http://t.test/item/7", later).unwrap_err();
        assert_eq!(refused, closure.reason);
        assert!(g.take_closures().is_empty(), "not a new closure");
        assert_eq!(g.admit("http://t.test/item/7", T0 + day), Ok(()));
        // Restored after it would have lifted, or allowed: nothing closes.
        let mut g = TrapGuard::new(TrapSettings::default());
        g.restore(&closure, T0 + day);
        assert_eq!(g.admit("http://t.test/item/7", T0 + day), Ok(()));
        let mut g = TrapGuard::new(TrapSettings::default());
        g.allow("t.test/item/{n}");
        g.restore(&closure, later);
        assert_eq!(g.admit("http://t.test/item/7", later), Ok(()));

        // A directory, a query space and a host on probation alike.
        for (reason, url) in [
            (
                TrapReason::Stale {
                    directory: "d.test/tag/".into(),
                    stale: 24,
                    pages: 30,
                },
                "http://d.test/tag/a+b/",
            ),
            (
                TrapReason::QuerySpace {
                    path: "d.test/shop".into(),
                    near_dups: 16,
                },
                "http://d.test/shop?color=red",
            ),
            (
                TrapReason::Host {
                    host: "p.test".into(),
                    run: 64,
                },
                "http://p.test/anything",
            ),
        ] {
            let mut g = TrapGuard::new(TrapSettings::default());
            g.restore(
                &TrapClosure {
                    reason: reason.clone(),
                    closed_at: T0,
                    pages: 30,
                },
                later,
            );
            assert_eq!(g.admit(url, later), Err(reason.clone()), "{url}");
            g.allow(&reason.family());
            assert_eq!(g.admit(url, later), Ok(()), "{url} allowed");
        }
    }
}
