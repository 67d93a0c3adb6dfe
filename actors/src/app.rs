//! `App`: the paper's `web_crawler_app`. `App::start` starts the supervision
//! tree; the [`AppHandle`] is the public API over the master's messages, as
//! the paper's module exports `add_url/1` and `search_text/2` over
//! `gen_server:cast`.

use crate::behaviour::index::{IndexShard, SearchAnswer};
use crate::config::{Behaviours, CrawlConfig, Storage};
use crate::outage::StoreFailure;
use crate::protocol::{
    ChildInfo, ChildRole, IdleReason, IndexerMsg, MasterMsg, PoolMsg, Queued, Status, SupMsg,
};
use crate::refusal::{Refusal, RefusalCode};
use crate::remote::ControlClient;
use crate::reply::ControlError;
use crate::runtime_settings::RuntimeSettings;
use crate::sup::{ExitReason, Sup, SupArgs};
use crate::types::{Millis, OperationSpec};
use ractor::{Actor, ActorRef, RpcReplyPort};
use std::time::{Duration, Instant};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Errors of the app API.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AppError {
    #[error("could not start the supervision tree: {0}")]
    Start(String),
    #[error("the crawler stopped: {0}")]
    Stopped(String),
    /// The store stopped the crawler: unavailable for longer than the
    /// outage limit, or failed for good. The text is one sentence saying
    /// since when, why, and what to do.
    #[error("{0}")]
    Store(StoreFailure),
    #[error("the master did not answer within {0:?}")]
    Timeout(Duration),
    /// Refused: a stable code and one line why ([`Refusal`]).
    #[error("{0}")]
    Rejected(Refusal),
}

impl From<ControlError> for AppError {
    fn from(e: ControlError) -> Self {
        AppError::Rejected(e.refusal())
    }
}

impl AppError {
    /// The stable code of a refusal ([`AppError::Rejected`]).
    pub fn code(&self) -> Option<RefusalCode> {
        match self {
            AppError::Rejected(r) => Some(r.code),
            _ => None,
        }
    }
}

/// The application: starts the tree.
#[derive(Debug)]
pub struct App;

impl App {
    /// Start `web_crawler_sup` with a pool and the master, which takes over
    /// the store (opened by the caller; see [`Storage::new`]).
    pub async fn start(
        config: CrawlConfig,
        storage: Storage,
        behaviours: Behaviours,
    ) -> Result<AppHandle, AppError> {
        Self::start_tree(config, Some(storage), None, behaviours).await
    }

    /// Start a worker node's tree: `web_crawler_sup` with a pool, which
    /// fetches for the master of the cluster this node joins, and with a
    /// `shard` an indexer that keeps the pages this node fetched.
    pub async fn start_worker(
        config: CrawlConfig,
        shard: Option<IndexShard>,
        behaviours: Behaviours,
    ) -> Result<AppHandle, AppError> {
        Self::start_tree(config, None, shard, behaviours).await
    }

    async fn start_tree(
        config: CrawlConfig,
        storage: Option<Storage>,
        shard: Option<IndexShard>,
        behaviours: Behaviours,
    ) -> Result<AppHandle, AppError> {
        if ActorRef::<SupMsg>::where_is(config.sup_name()).is_some() {
            return Err(AppError::Start(format!(
                "a node named {:?} already runs in this process",
                config.node_name
            )));
        }
        let (exit_tx, exit_rx) = watch::channel(None);
        let has_master = storage.is_some();
        let shard = shard.or_else(|| storage.as_ref().and_then(|s| s.index.clone()));
        let sup_name = config.sup_name();
        let settings = RuntimeSettings::new(config);
        let args = SupArgs {
            settings: settings.clone(),
            storage,
            shard,
            behaviours,
            exit: exit_tx,
        };
        let (sup, join) = Actor::spawn(Some(sup_name), Sup, args)
            .await
            .map_err(|e| AppError::Start(e.to_string()))?;
        Ok(AppHandle {
            settings,
            has_master,
            sup,
            join: Some(join),
            exit: exit_rx,
        })
    }
}

/// A running app. Dropping it leaves the tree running; call [`AppHandle::stop`].
#[derive(Debug)]
pub struct AppHandle {
    /// The node's settings, as the tree reads them.
    settings: RuntimeSettings,
    /// This node runs the master (a worker node runs a pool only).
    has_master: bool,
    sup: ActorRef<SupMsg>,
    join: Option<JoinHandle<()>>,
    exit: watch::Receiver<Option<ExitReason>>,
}

/// How long a call waits for a master that is being restarted.
const MASTER_WAIT: Duration = Duration::from_secs(10);

impl AppHandle {
    /// The node's settings now: its config, as an operator's `set` left it.
    pub fn config(&self) -> CrawlConfig {
        self.settings.current()
    }

    /// Queue a URL for a plain crawl. Returns the normalized URL, and
    /// whether it was waiting in the queue already. A URL
    /// processed already (with this operation, not due again) is refused
    /// as [`RefusalCode::AlreadyKnown`], as by every entry point to
    /// `add_url`; only its referral is recorded.
    pub async fn add_url(&self, url: &str) -> Result<Queued, AppError> {
        self.add_url_with(url, OperationSpec::crawl()).await
    }

    /// Queue a URL with an operation (paper: `add_url(URL, Operation)`).
    pub async fn add_url_with(
        &self,
        url: &str,
        operation: OperationSpec,
    ) -> Result<Queued, AppError> {
        self.queue(url, operation, false, None).await
    }

    /// Queue a URL to be fetched again, even if it was processed already
    /// (which a plain `add_url` refuses).
    pub async fn add_url_again(
        &self,
        url: &str,
        operation: OperationSpec,
    ) -> Result<Queued, AppError> {
        self.queue(url, operation, true, None).await
    }

    /// Queue a URL and watch it at an interval of its own (at least
    /// [`MIN_CHECK_EVERY_MS`](crate::availability::MIN_CHECK_EVERY_MS)), which
    /// the revisit policy adapts as it does `recrawl_every`, on a node
    /// that watches URLs ([`CrawlConfig::availability_watch`]). A URL processed
    /// already is fetched again now; a URL watched already takes the new
    /// interval.
    pub async fn add_url_watched(
        &self,
        url: &str,
        operation: OperationSpec,
        every: Duration,
    ) -> Result<Queued, AppError> {
        // Refused here: a zero interval would travel as `WATCH_OFF`.
        let every_ms = crate::availability::check_every(every)
            .map_err(|e| AppError::from(ControlError::from(e)))?;
        self.queue(url, operation, false, Some(every_ms)).await
    }

    /// Stop watching a URL, even at `recrawl_every`: it is fetched once
    /// more (so its stored state says so), then not again until it is
    /// given an interval of its own again.
    pub async fn unwatch(&self, url: &str, operation: OperationSpec) -> Result<Queued, AppError> {
        self.queue(url, operation, false, Some(crate::availability::WATCH_OFF))
            .await
    }

    async fn queue(
        &self,
        url: &str,
        operation: OperationSpec,
        again: bool,
        every_ms: Option<Millis>,
    ) -> Result<Queued, AppError> {
        let url = url.to_string();
        self.call_master(MASTER_WAIT, move |reply| MasterMsg::AddUrl {
            url: url.clone(),
            operation: operation.clone(),
            again,
            every_ms,
            reply,
        })
        .await?
        .map_err(|e| AppError::from(ControlError::from(e)))
    }

    /// Paper's `search_text(URL, Text)`: crawl from `url`, recording where
    /// `text` occurs on each page.
    pub async fn search_text(&self, url: &str, text: &str) -> Result<Queued, AppError> {
        if text.is_empty() {
            return Err(AppError::Rejected(Refusal::new(
                RefusalCode::BadOperation,
                "search text is empty",
            )));
        }
        self.add_url_with(url, OperationSpec::search_text(text))
            .await
    }

    pub async fn status(&self) -> Result<Status, AppError> {
        self.call_master(MASTER_WAIT, MasterMsg::Status).await
    }

    /// The `limit` best pages for `query` in the full-text index (ranked,
    /// with snippets, and `did_you_mean` when a typo was corrected). Pages
    /// are searchable about `index_commit_every` after they are processed.
    /// A crawl keeps an index when its storage has one
    /// ([`Storage::with_index`]; `web_crawler`'s `Settings::index_dir`).
    ///
    /// Every live node's shard is asked ([`crate::cluster_query`]); on the master's
    /// node through its control actor, which knows from the store which
    /// nodes hold pages (`nodes.missing` names those that did not answer).
    pub async fn search(&self, query: &str, limit: usize) -> Result<SearchAnswer, AppError> {
        let answer = if self.has_master {
            self.control().search(query, limit).await
        } else {
            crate::control::search(&self.config(), None, query.to_string(), limit).await
        };
        answer.map_err(AppError::from)
    }

    /// Index now what this node's queue holds for the index, so a search
    /// sees every page processed so far: as long as the backlog takes (a
    /// fast crawl can leave minutes of it); `Stopped` if the indexer dies
    /// meanwhile.
    pub async fn flush_index(&self) -> Result<(), AppError> {
        let indexer = ActorRef::<IndexerMsg>::where_is(self.config().indexer_name())
            .ok_or_else(|| AppError::from(ControlError::NoIndex))?;
        ractor::call!(indexer, IndexerMsg::CatchUp).map_err(|e| AppError::Stopped(e.to_string()))
    }

    /// Wait until nothing is pending or processing (or the page budget is
    /// spent). Survives master restarts; fails if the tree stops.
    pub async fn wait_idle(&self) -> Result<IdleReason, AppError> {
        loop {
            match self.call_master(MASTER_WAIT, MasterMsg::WaitIdle).await {
                Ok(reason) => return Ok(reason),
                // The master died while we waited: ask its successor.
                Err(AppError::Timeout(_)) => continue,
                Err(e) => return Err(e),
            }
        }
    }

    pub async fn pause(&self, paused: bool) -> Result<(), AppError> {
        let master = self.master().await?;
        master
            .cast(MasterMsg::Pause(paused))
            .map_err(|e| AppError::Stopped(e.to_string()))
    }

    /// Like `supervisor:which_children/1` on `web_crawler_sup`.
    pub async fn which_children(&self) -> Result<Vec<ChildInfo>, AppError> {
        ractor::call_t!(self.sup, SupMsg::WhichChildren, 5_000)
            .map_err(|e| AppError::Stopped(e.to_string()))
    }

    /// Restart the master as an operator does (console `restart master`):
    /// it is killed and started again without counting against the
    /// restart intensity, which is for crashes.
    pub async fn restart_master(&self) -> Result<(), AppError> {
        let killed = ractor::call_t!(
            self.sup,
            |reply| SupMsg::Restart(ChildRole::Master, reply),
            5_000
        )
        .map_err(|e| AppError::Stopped(e.to_string()))?;
        if killed {
            Ok(())
        } else {
            Err(AppError::Stopped("this node runs no master".to_string()))
        }
    }

    /// This (worker) node lost its master: the pool drops what it queued
    /// for it (see [`crate::cluster::stay_joined`]).
    pub fn master_lost(&self) {
        if let Some(pool) = ActorRef::<PoolMsg>::where_is(self.config().pool_name()) {
            let _ = pool.cast(PoolMsg::MasterLost);
        }
    }

    /// Kill the master (`exit(Pid, kill)`); the supervisor restarts it.
    pub async fn kill_master(&self) -> Result<(), AppError> {
        self.master().await?.kill();
        Ok(())
    }

    /// Wait until the tree stops by itself, and say why: `None` when it
    /// was stopped on request (an operator's `node stop`).
    pub async fn exited(&self) -> Option<AppError> {
        let mut exit = self.exit.clone();
        loop {
            if let Some(why) = self.failure() {
                return Some(why);
            }
            if matches!(*self.exit.borrow(), Some(ExitReason::Requested)) {
                return None;
            }
            // The watch fires on the supervisor's exit; the status check covers
            // a supervisor that died without publishing a reason.
            let _ = tokio::time::timeout(Duration::from_millis(500), exit.changed()).await;
        }
    }

    /// Why the tree stopped, once it has.
    pub fn exit_reason(&self) -> Option<ExitReason> {
        self.exit.borrow().clone()
    }

    /// The console's requests on this app's control actor, with typed
    /// replies: pages, results, hosts, status (the same calls and error type
    /// as a [`Remote`](crate::Remote) on a cluster). A worker node's app has
    /// no control actor: its requests fail with [`ControlError::NoControl`](crate::ControlError::NoControl).
    pub fn control(&self) -> ControlClient {
        ControlClient::named(self.config().control_name(), MASTER_WAIT)
    }

    /// Graceful stop: the master stops claiming, running slaves get
    /// `grace` to finish, URLs not started go back to pending, the last batch
    /// is written, then the tree stops.
    pub async fn stop(mut self, grace: Duration) -> Result<(), AppError> {
        if let Some(why) = self.failure() {
            return Err(why);
        }
        // A worker node has no master to drain: waiting for one to appear
        // would cost the whole MASTER_WAIT.
        if self.has_master
            && let Ok(master) = self.master().await
        {
            let _ = ractor::call_t!(
                master,
                |reply| MasterMsg::Drain {
                    timeout: grace,
                    reply
                },
                (grace + MASTER_WAIT).as_millis() as u64
            );
        }
        let _ = ractor::call_t!(self.sup, SupMsg::Shutdown, MASTER_WAIT.as_millis() as u64);
        if let Some(join) = self.join.take() {
            let _ = join.await;
        }
        match self.failure() {
            Some(why) => Err(why),
            None => Ok(()),
        }
    }

    /// Wait until the tree stops by itself (e.g. restart intensity exceeded).
    pub async fn wait(mut self) -> Result<(), AppError> {
        if let Some(join) = self.join.take() {
            let _ = join.await;
        }
        match self.failure() {
            Some(why) => Err(why),
            None => Ok(()),
        }
    }

    /// The tree stopped for a reason other than a requested stop.
    fn failure(&self) -> Option<AppError> {
        match &*self.exit.borrow() {
            Some(ExitReason::Requested) => None,
            Some(ExitReason::Failed(reason)) => Some(AppError::Stopped(reason.clone())),
            Some(ExitReason::Store(failure)) => Some(AppError::Store(failure.clone())),
            None if self.sup.get_status() == ractor::ActorStatus::Stopped => {
                Some(AppError::Stopped("the supervisor stopped".to_string()))
            }
            None => None,
        }
    }

    async fn master(&self) -> Result<ActorRef<MasterMsg>, AppError> {
        let deadline = Instant::now() + MASTER_WAIT;
        loop {
            if let Some(why) = self.failure() {
                return Err(why);
            }
            if let Some(master) = ActorRef::<MasterMsg>::where_is(self.config().master_name()) {
                return Ok(master);
            }
            if Instant::now() >= deadline {
                return Err(AppError::Timeout(MASTER_WAIT));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Call the master, retrying while it is being restarted. A timeout of
    /// `None` for the reply itself: idle waits can be long.
    async fn call_master<R, F>(&self, wait: Duration, build: F) -> Result<R, AppError>
    where
        R: Send + 'static,
        F: Fn(RpcReplyPort<R>) -> MasterMsg,
    {
        let deadline = Instant::now() + wait;
        loop {
            let master = self.master().await?;
            match ractor::call!(master, &build) {
                Ok(reply) => return Ok(reply),
                Err(e) => {
                    if let Some(why) = self.failure() {
                        return Err(why);
                    }
                    if Instant::now() >= deadline {
                        return Err(AppError::Timeout(wait));
                    }
                    tracing::debug!(error = %e, "master call failed; retrying");
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        }
    }
}
