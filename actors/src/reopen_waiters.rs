//! Operators waiting on a reopened trap family: answered once a store
//! cycle has written the reopening and knows what it released.

/// Replies (`R`) waiting, each on one family.
#[derive(Debug)]
pub(crate) struct ReopenWaiters<R> {
    waiting: Vec<(String, R)>,
}

impl<R> Default for ReopenWaiters<R> {
    fn default() -> Self {
        Self {
            waiting: Vec::new(),
        }
    }
}

impl<R> ReopenWaiters<R> {
    /// `reply` waits for `family` to be reopened in the store.
    pub(crate) fn wait(&mut self, family: String, reply: R) {
        self.waiting.push((family, reply));
    }

    /// The replies waiting on `family`, in the order they came; the others
    /// stay.
    pub(crate) fn take(&mut self, family: &str) -> Vec<R> {
        let (answered, waiting) = std::mem::take(&mut self.waiting)
            .into_iter()
            .partition(|(f, _)| f == family);
        self.waiting = waiting;
        answered.into_iter().map(|(_, reply)| reply).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_family_takes_its_own_waiters_only_and_once() {
        let mut w = ReopenWaiters::default();
        w.wait("a.test/tag/".to_string(), 1);
        w.wait("b.test/day/".to_string(), 2);
        w.wait("a.test/tag/".to_string(), 3);
        assert_eq!(w.take("a.test/tag/"), [1, 3]);
        assert!(w.take("a.test/tag/").is_empty(), "answered once");
        assert!(w.take("c.test/x/").is_empty());
        assert_eq!(w.take("b.test/day/"), [2]);
    }
}
