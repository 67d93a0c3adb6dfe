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
use web_crawler::actors::{
    ControlError, ControlReply, ControlRequest, OperationSpec, Remote, UrlOutcome,
};

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
    /// Attach the paper's search_text operation with this text (`--search`
    /// is its older spelling, kept for scripts).
    #[arg(long, value_name = "TEXT", visible_alias = "search")]
    search_text: Option<String>,
    /// Attach the mirror operation: archive the responses of this URL's crawl.
    #[arg(long, conflicts_with = "search_text")]
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
    /// The operation the flags attach: search_text, mirror or none (a crawl).
    fn operation(&self) -> OperationSpec {
        match &self.search_text {
            Some(text) => OperationSpec::search_text(text.clone()),
            None if self.mirror => web_crawler::operations::mirror(),
            None => OperationSpec::crawl(),
        }
    }

    pub(super) async fn exec(self) -> Result<ExitCode> {
        let request = ControlRequest::AddUrl {
            url: self.url.clone(),
            operation: self.operation(),
            again: self.again,
            every_ms: self
                .every
                .as_deref()
                .map(parse_watch)
                .transpose()
                .map_err(|e| anyhow::anyhow!("--every: {e}"))?,
        };
        if !self.remote.json {
            return one_shot(&self.remote, request).await;
        }
        let remote = &self.remote;
        let conn = connect(
            &remote.connect,
            &remote.cookie_file,
            Duration::from_secs(remote.wait),
        )
        .await?;
        let answer = conn.request(&request).await;
        conn.close();
        let outcome = add_url_outcome(self.url, answer)?;
        outln!("{}", serde_json::to_string_pretty(&outcome)?)?;
        // As without --json: 0 when the URL is in the queue (added, or
        // waiting already), 1 when it is not (processed, or refused).
        Ok(if outcome.accepted {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        })
    }
}

/// `add-url --json`'s one answer, whatever the outcome (`added`,
/// `already_queued`, `already_processed`, `refused` with its stable code),
/// as `POST /urls` answers for one URL. A refusal is an answer, on stdout.
fn add_url_outcome(url: String, answer: Result<ControlReply, ControlError>) -> Result<UrlOutcome> {
    match answer {
        Ok(ControlReply::Queued(queued)) => Ok(UrlOutcome::of(url, Ok(queued))),
        Ok(other) => bail!("the node answered another request: {other:?}"),
        Err(refused) => Ok(UrlOutcome::of(url, Err(refused))),
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use web_crawler::actors::{Queued, Refusal, RefusalCode};

    #[test]
    fn add_url_json_answers_each_outcome_with_its_code() {
        let as_json = |answer| {
            serde_json::to_value(add_url_outcome("HTTP://a/".into(), answer).unwrap()).unwrap()
        };
        let queued = |already_queued| {
            Ok(ControlReply::Queued(Queued {
                url: "http://a/".into(),
                already_queued,
            }))
        };
        assert_eq!(
            as_json(queued(false)),
            json!({"url": "HTTP://a/", "outcome": "added", "accepted": true, "normalized": "http://a/"})
        );
        assert_eq!(
            as_json(queued(true)),
            json!({
                "url": "HTTP://a/", "outcome": "already_queued", "accepted": true,
                "normalized": "http://a/"
            })
        );
        // As it crosses the wire from the node.
        let processed = Refusal::new(RefusalCode::AlreadyKnown, "http://a/ was already processed");
        assert_eq!(
            as_json(Err(ControlError::Refused(processed))),
            json!({
                "url": "HTTP://a/",
                "outcome": "already_processed",
                "accepted": false,
                "error": {"code": "already_known", "message": "http://a/ was already processed"}
            })
        );
        let scope = Refusal::new(RefusalCode::OutOfScope, "off the crawl's hosts");
        let refused = as_json(Err(ControlError::Refused(scope)));
        assert_eq!(
            (&refused["outcome"], &refused["error"]["code"]),
            (&json!("refused"), &json!("out_of_scope"))
        );
        assert!(add_url_outcome("u".into(), Ok(ControlReply::Nodes(vec![]))).is_err());
    }

    #[test]
    fn add_url_takes_search_text_and_its_older_spelling_search() {
        use clap::Parser;
        #[derive(Debug, Parser)]
        struct Line {
            #[command(flatten)]
            add: AddUrlArgs,
        }
        let parse = |flags: &[&str]| {
            let remote = ["--connect", "h:1", "--cookie-file", "c"];
            let line = ["add-url", "http://a/"].iter().chain(flags).chain(&remote);
            Line::try_parse_from(line).map(|l| l.add.operation())
        };
        for flag in ["--search-text", "--search"] {
            assert_eq!(
                parse(&[flag, "rye bread"]).unwrap(),
                OperationSpec::search_text("rye bread"),
                "{flag}"
            );
        }
        assert_eq!(
            parse(&["--mirror"]).unwrap(),
            web_crawler::operations::mirror()
        );
        assert!(parse(&["--search", "rye", "--mirror"]).is_err());
    }
}
