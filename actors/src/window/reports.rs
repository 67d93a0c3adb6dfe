//! Slaves' reports, hosts' records and users' seeds into the next commit
//! batch: retries with their backoff, giving up, and a one-shot run whose
//! every host refuses its connection.

use super::Window;
use crate::behaviour::{ProcessedPage, Retry, WhyUnreachable};
use crate::config::CrawlConfig;
use crate::protocol::SlaveReport;
use crate::refusals::{OnRefusal, REFUSED_RETRY_MS};
use crate::types::{Job, Millis, NewLink, PageRecord, ROBOTS_BLOCKED};

/// Whether `report` shows its host answered: a response of any status,
/// or robots.txt read (what `RobotsBlocked` needs).
fn answered(report: &SlaveReport) -> bool {
    match report {
        SlaveReport::Page { .. } | SlaveReport::RobotsBlocked { .. } => true,
        SlaveReport::Failed { status, .. } => status.is_some(),
        SlaveReport::RobotsUnreachable { .. } => false,
    }
}

/// A URL's error while its host's robots.txt cannot be had, with why.
fn robots_unreachable(why: &WhyUnreachable) -> String {
    match why {
        WhyUnreachable::Failed(why) if why.is_empty() => "robots.txt unreachable".to_string(),
        why => format!("robots.txt unreachable ({why})"),
    }
}

/// When a failed attempt may be retried: the backoff doubles with each
/// attempt, and a host's `Retry-After` wins when later.
fn retry_at(cfg: &CrawlConfig, attempts: u32, retry_after: Option<Millis>, now: Millis) -> Millis {
    let backoff = cfg.retry_backoff.as_millis() as Millis * (1_i64 << attempts.min(16));
    retry_after.unwrap_or(0).max(now + backoff)
}

impl Window {
    /// Turn a report into writes for the next batch; returns whether the
    /// batch should be written now rather than at the next flush.
    pub fn on_report(&mut self, mut report: SlaveReport, now: Millis) -> bool {
        // Almost always empty: no key is built for every report.
        if !self.availability.asked_meanwhile.is_empty()
            && let Some(every) = self
                .availability
                .asked_meanwhile
                .remove(&report.job().key())
        {
            report.job_mut().check_every_ms = Some(every);
        }
        self.unwritten.reported.push(report.job().clone());
        if answered(&report) {
            self.refusals.answered();
        }
        match report {
            SlaveReport::Page { job, mut page } => {
                self.fetched += 1;
                self.guard_links(&mut page, job.last.is_none(), now);
                self.track_availability(&job, &mut page, now);
                self.unwritten.batch.pages.push(*page);
            }
            SlaveReport::RobotsBlocked { job } => {
                let page = self.failed_page(job, None, ROBOTS_BLOCKED.to_string());
                self.unwritten.batch.pages.push(page);
            }
            SlaveReport::RobotsUnreachable { job, retry_at, why } => {
                self.errors += 1;
                let attempt = job.attempts + 1;
                let reason = robots_unreachable(&why);
                let (retry_at, give_up) = match why {
                    WhyUnreachable::Refused => {
                        match self
                            .refusals
                            .refused(&job.host, attempt, self.cfg.max_attempts)
                        {
                            OnRefusal::GiveUp => (retry_at, true),
                            OnRefusal::RetrySoon => (now.saturating_add(REFUSED_RETRY_MS), false),
                            OnRefusal::Retry => (retry_at, false),
                        }
                    }
                    WhyUnreachable::Failed(_) => (retry_at, false),
                };
                if give_up {
                    tracing::info!(url = %job.url, attempt, "giving up: every host of the run refused the connection");
                    let error = format!(
                        "failed after {attempt} attempt(s): connection refused, as on every host of this run"
                    );
                    let page = self.failed_page(job, None, error);
                    self.unwritten.batch.pages.push(page);
                } else if self.cfg.keep_retrying_robots || attempt < self.cfg.max_attempts {
                    self.unwritten.batch.retries.push(Retry {
                        key: job.key(),
                        not_before: retry_at,
                        error: reason,
                    });
                } else {
                    tracing::info!(url = %job.url, attempt, %reason, "giving up");
                    let error = format!("failed after {attempt} attempt(s): {reason}");
                    let page = self.failed_page(job, None, error);
                    self.unwritten.batch.pages.push(page);
                }
            }
            SlaveReport::Failed {
                job,
                reason,
                retryable,
                status,
                retry_after,
            } => {
                self.errors += 1;
                let attempt = job.attempts + 1;
                // A watched URL's check is not retried: the next check is
                // its retry, and a failure now is what it has to tell.
                let recheck = self.revisit(job.check_every_ms).is_some() && job.last.is_some();
                if retryable && attempt < self.cfg.max_attempts && !recheck {
                    tracing::debug!(url = %job.url, %reason, attempt, "will retry");
                    self.unwritten.batch.retries.push(Retry {
                        key: job.key(),
                        not_before: retry_at(&self.cfg, job.attempts, retry_after, now),
                        error: reason,
                    });
                } else {
                    tracing::info!(url = %job.url, %reason, attempt, "giving up");
                    if status.is_some() {
                        self.fetched += 1;
                    }
                    let error = format!("failed after {attempt} attempt(s): {reason}");
                    let mut page = self.failed_page(job.clone(), status, error);
                    self.track_availability(&job, &mut page, now);
                    self.unwritten.batch.pages.push(page);
                }
            }
        }
        self.write_due()
    }

    fn failed_page(&self, job: Job, status: Option<u16>, error: String) -> ProcessedPage {
        ProcessedPage {
            record: PageRecord {
                url: job.url,
                operation: job.operation,
                host: job.host,
                depth: job.depth,
                http_returncode: status,
                error: Some(error),
                node: self.cfg.node_name.clone(),
                // Kept: a URL that failed is watched as before.
                check_every_ms: job.check_every_ms,
                ..PageRecord::default()
            },
            ..ProcessedPage::default()
        }
    }

    pub fn host_record(&mut self, record: crate::types::HostRecord) {
        if record.robots_status != crate::types::RobotsStatus::Unreachable
            || record.robots_http_code.is_some()
        {
            self.refusals.answered();
        }
        self.unwritten.batch.hosts.push(record);
    }

    /// A URL a user added: written in the next cycle.
    pub fn add_seed(&mut self, link: NewLink, now: Millis) {
        if let Some(every) = link.check_every_ms {
            self.asked_while_fetched(&link, every, now);
        }
        self.unwritten.batch.seeds.push(link);
    }

    pub fn fetched(&self) -> u64 {
        self.fetched
    }

    pub fn errors(&self) -> u64 {
        self.errors
    }
}

#[cfg(test)]
mod tests {
    use crate::behaviour::WhyUnreachable;
    use crate::protocol::SlaveReport;
    use crate::types::{Job, Millis};
    use crate::window::fixtures::*;

    #[test]
    fn retries_back_off_exponentially_and_honour_retry_after() {
        let mut w = running(cfg(), &["a"]);
        let mut j = job("h", "/");
        claim(&mut w, vec![j.clone()], &["a"]);
        w.on_report(failed(&j, true, None), T0);
        j.attempts = 1;
        w.on_report(failed(&j, true, Some(T0 + 60_000)), T0);
        j.attempts = 1;
        w.on_report(failed(&j, true, Some(T0 + 10)), T0);
        let retries: Vec<Millis> = w
            .start_cycle(true, false, false, T0)
            .unwrap()
            .batch
            .retries
            .iter()
            .map(|r| r.not_before - T0)
            .collect();
        assert_eq!(retries, vec![2_000, 60_000, 4_000]);
        // The last attempt is recorded as failed, not retried.
        j.attempts = 2;
        w.cycle_done(Vec::new(), None, &nodes(&["a"]), T0);
        w.on_report(failed(&j, true, None), T0);
        let batch = w.start_cycle(true, false, false, T0).unwrap().batch;
        assert!(batch.retries.is_empty());
        assert_eq!(
            batch.pages[0].record.error.as_deref(),
            Some("failed after 3 attempt(s): timeout")
        );
    }

    #[test]
    fn unreachable_robots_fail_a_one_shot_crawl_but_not_a_service() {
        let j = job("h", "/");
        let report = |attempts: u32| SlaveReport::RobotsUnreachable {
            job: Job {
                attempts,
                ..j.clone()
            },
            retry_at: T0 + 10_000,
            why: WhyUnreachable::Failed("http://h/robots.txt: HTTP 503".into()),
        };
        let mut w = running(cfg(), &["a"]);
        w.on_report(report(0), T0);
        w.on_report(report(2), T0);
        let batch = w.start_cycle(true, false, false, T0).unwrap().batch;
        assert_eq!(batch.retries.len(), 1);
        assert_eq!(batch.retries[0].not_before, T0 + 10_000);
        assert_eq!(
            batch.pages[0].record.error.as_deref(),
            Some(
                "failed after 3 attempt(s): robots.txt unreachable (http://h/robots.txt: HTTP 503)"
            )
        );
        let mut service = cfg();
        service.keep_retrying_robots = true;
        let mut w = running(service, &["a"]);
        w.on_report(report(50), T0);
        let batch = w.start_cycle(true, false, false, T0).unwrap().batch;
        assert_eq!((batch.retries.len(), batch.pages.len()), (1, 0));
    }

    /// `job`'s host refused the connection on its robots.txt.
    fn refused(job: &Job, attempts: u32) -> SlaveReport {
        SlaveReport::RobotsUnreachable {
            job: Job {
                attempts,
                ..job.clone()
            },
            retry_at: T0 + 10_000,
            why: WhyUnreachable::Refused,
        }
    }

    #[test]
    fn a_run_whose_every_host_refuses_ends_within_a_second_or_two() {
        let (r1, r2) = (job("r1", "/"), job("r2", "/"));
        let mut w = running(cfg(), &["a"]);
        claim(&mut w, vec![r1.clone(), r2.clone()], &["a"]);
        // r2 may still answer: r1 is asked again soon, not in 10 s.
        w.on_report(refused(&r1, 0), T0);
        let batch = w.start_cycle(true, false, false, T0).unwrap().batch;
        assert_eq!(batch.retries.len(), 1);
        assert_eq!(batch.retries[0].not_before, T0 + 1_000);
        assert_eq!(
            batch.retries[0].error,
            "robots.txt unreachable (connection refused)"
        );
        w.cycle_done(Vec::new(), None, &nodes(&["a"]), T0);
        // Now every host of the run refused: no more waiting than a second.
        w.on_report(refused(&r2, 0), T0);
        w.on_report(refused(&r1, 1), T0 + 1_000);
        w.on_report(refused(&r2, 1), T0 + 1_000);
        let batch = w.start_cycle(true, false, false, T0).unwrap().batch;
        assert_eq!(batch.retries.len(), 1, "r2's first refusal");
        let errors: Vec<&str> = batch
            .pages
            .iter()
            .filter_map(|p| p.record.error.as_deref())
            .collect();
        assert_eq!(
            errors,
            [
                "failed after 2 attempt(s): connection refused, as on every host of this run",
                "failed after 2 attempt(s): connection refused, as on every host of this run",
            ]
        );
    }

    #[test]
    fn a_refused_host_keeps_its_retries_beside_a_host_that_answers() {
        let (r, busy, up) = (job("r", "/"), job("busy", "/"), job("up", "/"));
        // A host answering 503 is no refusal: the refused one is not given
        // up, and its last attempt waits the whole robots_retry.
        let mut w = running(cfg(), &["a"]);
        claim(&mut w, vec![r.clone(), busy.clone()], &["a"]);
        w.on_report(refused(&r, 0), T0);
        w.on_report(refused(&r, 1), T0);
        let batch = w.start_cycle(true, false, false, T0).unwrap().batch;
        let waits: Vec<Millis> = batch.retries.iter().map(|r| r.not_before).collect();
        assert_eq!(waits, [T0 + 1_000, T0 + 10_000]);
        assert!(batch.pages.is_empty());
        // Once a host answered, a refusal is retried as any failure.
        let mut w = running(cfg(), &["a"]);
        claim(&mut w, vec![r.clone(), up.clone()], &["a"]);
        w.on_report(page(&up), T0);
        w.on_report(refused(&r, 0), T0);
        let batch = w.start_cycle(true, false, false, T0).unwrap().batch;
        assert_eq!(batch.retries[0].not_before, T0 + 10_000);
        // A service never gives up on a host.
        let mut service = cfg();
        service.keep_retrying_robots = true;
        let mut w = running(service, &["a"]);
        claim(&mut w, vec![r.clone()], &["a"]);
        w.on_report(refused(&r, 7), T0);
        let batch = w.start_cycle(true, false, false, T0).unwrap().batch;
        assert_eq!((batch.retries.len(), batch.pages.len()), (1, 0));
    }
}
