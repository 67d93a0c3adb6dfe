//! A node's runtime settings in one place, as OTP keeps an application's
//! environment: the app creates them from the config the node started
//! with; the supervisor, the master, every pool (one restarted later too),
//! the control actor and the app's handle read them here, and an
//! operator's `set` writes them. A copy in each actor would be lost with
//! the actor (a restarted pool would start again from the start config),
//! or left behind by a `set`.

use crate::config::CrawlConfig;
use crate::protocol::Setting;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// The handle: clones share one value.
#[derive(Clone, Debug)]
pub(crate) struct RuntimeSettings(Arc<watch::Sender<CrawlConfig>>);

impl RuntimeSettings {
    pub(crate) fn new(config: CrawlConfig) -> Self {
        Self(Arc::new(watch::channel(config).0))
    }

    /// The settings now.
    pub(crate) fn current(&self) -> CrawlConfig {
        self.0.borrow().clone()
    }

    /// An operator's change; every reader sees it from now on.
    pub(crate) fn set(&self, setting: &Setting) {
        self.0.send_modify(|config| apply(config, setting));
    }

    /// A receiver that tells its holder the settings changed (the master
    /// resizes its window then).
    pub(crate) fn subscribe(&self) -> watch::Receiver<CrawlConfig> {
        self.0.subscribe()
    }
}

/// What `set` does to a config: a count below 1 is 1 (a node with no
/// slave, or a host with no request, would never fetch again).
pub(crate) fn apply(config: &mut CrawlConfig, setting: &Setting) {
    match setting {
        Setting::DelayMs(ms) => config.min_delay = Duration::from_millis(*ms),
        Setting::PerHost(n) => config.per_host = (*n).max(1),
        Setting::Concurrency(n) => config.concurrency = (*n).max(1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_changes_one_setting_and_never_to_zero() {
        let mut config = CrawlConfig::default();
        apply(&mut config, &Setting::Concurrency(8));
        apply(&mut config, &Setting::DelayMs(1_500));
        assert_eq!(config.concurrency, 8);
        assert_eq!(config.min_delay, Duration::from_millis(1_500));
        assert_eq!(config.per_host, CrawlConfig::default().per_host);
        apply(&mut config, &Setting::Concurrency(0));
        apply(&mut config, &Setting::PerHost(0));
        assert_eq!((config.concurrency, config.per_host), (1, 1));
    }

    #[test]
    fn every_handle_and_subscriber_sees_a_change() {
        let settings = RuntimeSettings::new(CrawlConfig::default());
        let mut master = settings.subscribe();
        let later = settings.clone();
        settings.set(&Setting::Concurrency(3));
        assert_eq!(later.current().concurrency, 3);
        assert!(master.has_changed().unwrap());
        assert_eq!(master.borrow_and_update().concurrency, 3);
        assert!(!master.has_changed().unwrap());
    }
}
