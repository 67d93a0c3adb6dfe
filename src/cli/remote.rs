//! Talking to a running cluster (like `erl -remsh` and `rpc:call`):
//! `console`, `add-url` and `status`; and the cluster's cookie and
//! connection, which `node`, `search --connect` and `search-text
//! --connect` use too.

use super::console;
use super::parse::parse_watch;
use anyhow::{Context, Result, bail};
use clap::Args;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;
use web_crawler::actors::{ControlRequest, OperationSpec, Remote};

/// A running cluster to talk to.
#[derive(Debug, Args)]
pub(super) struct RemoteOpts {
    /// A node of the cluster (the master's node).
    #[arg(long, value_name = "HOST:PORT")]
    pub(super) connect: String,
    /// The cluster's cookie file.
    #[arg(long)]
    pub(super) cookie_file: PathBuf,
    /// Print the reply as JSON.
    #[arg(long)]
    pub(super) json: bool,
    /// Seconds to wait for the node.
    #[arg(long, default_value_t = 10)]
    pub(super) wait: u64,
}

/// `console`.
#[derive(Debug, Args)]
pub(super) struct ConsoleArgs {
    #[command(flatten)]
    remote: RemoteOpts,
}

impl ConsoleArgs {
    pub(super) async fn exec(self) -> Result<ExitCode> {
        let remote = self.remote;
        let conn = connect(
            &remote.connect,
            &remote.cookie_file,
            Duration::from_secs(remote.wait),
        )
        .await?;
        let failed = console::run_console(conn, &remote.connect, remote.json).await?;
        // At a terminal the operator saw each error; a script reading
        // a pipe's exit code learns that some command failed.
        let piped = !std::io::stdin().is_terminal();
        Ok(if piped && failed > 0 {
            ExitCode::FAILURE
        } else {
            ExitCode::SUCCESS
        })
    }
}

/// `add-url`.
#[derive(Debug, Args)]
pub(super) struct AddUrlArgs {
    url: String,
    /// Attach the search operation with this text.
    #[arg(long, value_name = "TEXT")]
    search: Option<String>,
    /// Attach the mirror operation: archive the responses of this URL's crawl.
    #[arg(long, conflicts_with = "search")]
    mirror: bool,
    /// Fetch it again even if it was processed (without it, a URL
    /// already processed is refused with when).
    #[arg(long)]
    again: bool,
    /// Watch it at this interval of its own, e.g. `30s`, `10min`, `1h`
    /// (1s at the least): it overrides --recrawl-every, and the node
    /// need not have one. `off`: not watched, not even at
    /// --recrawl-every. A URL processed already is fetched again now.
    #[arg(long, value_name = "DURATION|off")]
    every: Option<String>,
    #[command(flatten)]
    remote: RemoteOpts,
}

impl AddUrlArgs {
    pub(super) async fn exec(self) -> Result<ExitCode> {
        let operation = match self.search {
            Some(text) => OperationSpec::search_text(text),
            None if self.mirror => web_crawler::operations::mirror(),
            None => OperationSpec::crawl(),
        };
        one_shot(
            &self.remote,
            ControlRequest::AddUrl {
                url: self.url,
                operation,
                again: self.again,
                every_ms: self
                    .every
                    .as_deref()
                    .map(parse_watch)
                    .transpose()
                    .map_err(|e| anyhow::anyhow!("--every: {e}"))?,
            },
        )
        .await
    }
}

/// `status`.
#[derive(Debug, Args)]
pub(super) struct StatusArgs {
    #[command(flatten)]
    remote: RemoteOpts,
}

impl StatusArgs {
    pub(super) async fn exec(self) -> Result<ExitCode> {
        one_shot(&self.remote, ControlRequest::Status).await
    }
}

/// The cookie from a cookie file (as `.erlang.cookie`): trimmed, never printed.
pub(super) fn read_cookie(path: &Path) -> Result<String> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read cookie file {}", path.display()))?;
    let cookie = text.trim().to_string();
    if cookie.is_empty() {
        bail!("cookie file {} is empty", path.display());
    }
    Ok(cookie)
}

/// Connect to the node at `addr` with the cookie in `cookie_file`.
pub(super) async fn connect(addr: &str, cookie_file: &Path, timeout: Duration) -> Result<Remote> {
    let cookie = read_cookie(cookie_file)?;
    Ok(Remote::connect(addr, &cookie, timeout).await?)
}

/// Send one request to a running cluster and print the reply.
pub(super) async fn one_shot(remote: &RemoteOpts, req: ControlRequest) -> Result<ExitCode> {
    let conn = connect(
        &remote.connect,
        &remote.cookie_file,
        Duration::from_secs(remote.wait),
    )
    .await?;
    let reply = conn.request(&req).await;
    conn.close();
    let reply = reply?;
    if remote.json {
        outln!("{}", serde_json::to_string_pretty(&reply)?)?;
    } else {
        outln!("{}", console::render(&reply))?;
    }
    Ok(ExitCode::SUCCESS)
}
