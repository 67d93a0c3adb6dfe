//! How a command stops on SIGINT and SIGTERM.

use anyhow::Result;
use std::process::ExitCode;

/// SIGINT and SIGTERM: the first stops gracefully (in-flight URLs finish or
/// go back to pending, the summary is printed), a second one at once.
/// Both are listened for from [`StopSignals::new`] on, so one that comes
/// before [`StopSignals::first`] is waited for still stops gracefully.
pub(super) struct StopSignals {
    interrupt: tokio::signal::unix::Signal,
    term: tokio::signal::unix::Signal,
}

impl StopSignals {
    pub(super) fn new() -> Result<Self> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(Self {
            interrupt: signal(SignalKind::interrupt())?,
            term: signal(SignalKind::terminate())?,
        })
    }

    /// Wait for the first signal and return the exit code it stands for
    /// (128 + its number); from then on a second one ends the process.
    pub(super) async fn first(&mut self) -> ExitCode {
        let code = tokio::select! {
            _ = self.interrupt.recv() => 130,
            _ = self.term.recv() => 143,
        };
        eprintln!("stopping (a second signal stops at once)");
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate());
        tokio::spawn(async move {
            let again = async {
                match &mut term {
                    Ok(term) => term.recv().await,
                    Err(_) => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = again => {}
            }
            std::process::exit(i32::from(code));
        });
        ExitCode::from(code)
    }
}
