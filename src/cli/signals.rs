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
    /// A live progress line is on stderr, without its newline.
    progress_line: bool,
}

impl StopSignals {
    pub(super) fn new() -> Result<Self> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(Self {
            interrupt: signal(SignalKind::interrupt())?,
            term: signal(SignalKind::terminate())?,
            progress_line: false,
        })
    }

    /// The command shows a live progress line: the notice of a stop
    /// starts on a line of its own, below it.
    pub(super) fn below_progress_line(mut self, shown: bool) -> Self {
        self.progress_line = shown;
        self
    }

    /// Wait for the first signal and return the exit code it stands for
    /// (128 + its number); from then on a second one ends the process.
    pub(super) async fn first(&mut self) -> ExitCode {
        let code = tokio::select! {
            _ = self.interrupt.recv() => 130,
            _ = self.term.recv() => 143,
        };
        eprintln!("{}", stop_notice(self.progress_line));
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

/// What the first signal prints: on a line of its own, ending the progress
/// line that may be there.
fn stop_notice(progress_line: bool) -> &'static str {
    if progress_line {
        "\nstopping (a second signal stops at once)"
    } else {
        "stopping (a second signal stops at once)"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stop_notice_starts_below_the_progress_line() {
        let progress = "412 pages  9 pages/s (avg 12)  indexed 174 of 176";
        let shown = format!("\r\x1b[K{progress}{}\n", stop_notice(true));
        assert_eq!(
            shown.lines().last(),
            Some("stopping (a second signal stops at once)")
        );
        assert_eq!(
            stop_notice(false),
            "stopping (a second signal stops at once)"
        );
    }
}
