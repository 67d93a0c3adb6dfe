//! The `web_crawler` command: its flags, one file per command group (as
//! cargo keeps one file per command under `src/bin/cargo/commands/`),
//! each with its flags and a short `exec` that calls the library and
//! prints.
//!
//! - `crawl.rs`: `crawl`, `search-text` (a crawl to the end, its summary)
//! - `node.rs`: `start`, `node` (a node of a cluster, until it is stopped)
//! - `remote.rs`: `console`, `add-url`, `status` (a running cluster)
//! - `search.rs`: `search`; `report.rs`: `report ...`; `index.rs`: `index rebuild`
//! - `console.rs`: the operator's shell; `prometheus.rs`: `--metrics`
//!
//! What several of them share sits in leaves that import none of them:
//! `opts.rs` (flag groups: the store, tuning, supervision), `parse.rs`
//! (flag values), `rows.rs` (table rows the console and reports print
//! alike) and `signals.rs` (stopping on SIGINT and SIGTERM).

/// `println!` that returns the error rather than panicking when standard
/// output is gone (`web_crawler status --json | head -c 600`): `main` ends
/// such a run quietly, exit 0, as `ls | head` does.
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        writeln!(std::io::stdout().lock(), $($arg)*)
    }};
}

mod console;
mod crawl;
mod index;
mod node;
mod opts;
mod parse;
mod prometheus;
mod remote;
mod report;
mod rows;
mod search;
mod signals;

use anyhow::Result;
use clap::{Parser, Subcommand};
use std::process::ExitCode;
use web_crawler::actors::{AppError, AppHandle, StoreFailureKind};

/// Exit codes, for scripts: one table for every command and path.
const EXIT_CODES: &str = "Exit codes: 0 done; 1 an error (bad arguments included); \
2 a crawl that could fetch no page (every request failed); 74 the store failed for good \
(a full disk, refused credentials: fix it and run again to resume); 75 the store was \
unreachable for longer than --store-outage-limit (run again once it is back); 128 + N \
stopped by signal N.";

/// A crawl whose every request failed (an unreachable seed, a typo in its
/// host): a script must not read it as done.
pub(crate) const EXIT_NOTHING_FETCHED: u8 = 2;

/// The store failed for good (sysexits' EX_IOERR).
pub(crate) const EXIT_STORE_FAILED: u8 = 74;
/// The store stayed unreachable past --store-outage-limit (EX_TEMPFAIL).
pub(crate) const EXIT_STORE_UNREACHABLE: u8 = 75;

#[derive(Debug, Parser)]
#[command(
    name = "web_crawler",
    version,
    about = "An OTP-style supervised web crawler",
    after_help = EXIT_CODES
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Crawl from the given URLs until nothing is pending (or a budget is hit).
    /// The --db file is created if missing; running it again on the same
    /// --db resumes.
    #[command(after_help = EXIT_CODES)]
    Crawl(crawl::CrawlArgs),
    /// Crawl from URL recording where TEXT occurs on each page (the paper's
    /// search_text), then print the pages and positions. With --connect, queue
    /// it on a running cluster instead.
    #[command(after_help = EXIT_CODES)]
    SearchText(crawl::SearchTextArgs),
    /// Run a node with the master (like `erl -sname NAME` + the application):
    /// the supervision tree, its pool, and the control actor consoles talk to.
    #[command(after_help = EXIT_CODES)]
    Start(Box<node::StartArgs>),
    /// Run a worker node: a pool that fetches for the master of the cluster it joins.
    Node(node::NodeArgs),
    /// Attach an interactive shell to a running cluster (like `erl -remsh`).
    Console(remote::ConsoleArgs),
    /// Queue a URL on a running cluster.
    AddUrl(remote::AddUrlArgs),
    /// Print a running cluster's status.
    Status(remote::StatusArgs),
    /// Search the pages a crawl indexed (offline: reads the index
    /// directory only, never the store; works while a crawl writes).
    Search(search::SearchArgs),
    /// Manage the full-text index.
    Index {
        #[command(subcommand)]
        action: index::IndexAction,
    },
    /// Print what a crawl stored.
    Report {
        #[command(subcommand)]
        what: report::Report,
    },
}

/// Wait until everything queued for the index is committed (at once
/// without an index): what `crawl` and `index rebuild` do before they stop.
async fn index_caught_up(app: &AppHandle) -> Result<()> {
    if app.status().await?.index.is_none() {
        return Ok(());
    }
    // An indexer that died meanwhile is restarted and asked again.
    while let Err(e) = app.flush_index().await {
        if !matches!(e, AppError::Stopped(_)) {
            return Err(e.into());
        }
    }
    Ok(())
}

/// The exit code and the one line an error ends the command with: a store
/// failure has exit codes of its own ([`EXIT_CODES`]) and says what to do.
pub(crate) fn failure(e: &anyhow::Error) -> (ExitCode, String) {
    let store = e.chain().find_map(|c| match c.downcast_ref::<AppError>() {
        Some(AppError::Store(failure)) => Some(failure),
        _ => None,
    });
    match store {
        Some(failure) => {
            let code = match failure.kind {
                StoreFailureKind::Unreachable { .. } => EXIT_STORE_UNREACHABLE,
                _ => EXIT_STORE_FAILED,
            };
            (ExitCode::from(code), format!("error: {failure}"))
        }
        None => (ExitCode::FAILURE, format!("error: {e:#}")),
    }
}

/// A command line that cannot be read: clap's message, and exit code 1 as
/// for every other error (clap's own 2 means "no page could be fetched"
/// here); `--help` and `--version` print to stdout and exit 0.
pub(crate) fn usage(e: &clap::Error) -> ExitCode {
    // Help piped to `head` is not an error either.
    let _ = e.print();
    usage_exit_code(e)
}

fn usage_exit_code(e: &clap::Error) -> ExitCode {
    if e.use_stderr() {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

pub(crate) async fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Crawl(args) => args.exec().await,
        Command::SearchText(args) => args.exec().await,
        Command::Start(args) => args.exec().await,
        Command::Node(args) => args.exec().await,
        Command::Console(args) => args.exec().await,
        Command::AddUrl(args) => args.exec().await,
        Command::Status(args) => args.exec().await,
        Command::Search(args) => args.exec().await,
        Command::Index { action } => action.exec().await,
        Command::Report { what } => what.exec().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_limit_of_zero_is_a_usage_error() {
        let search = Cli::try_parse_from(["web_crawler", "search", "csv", "--limit", "0"]);
        let e = search.unwrap_err();
        assert_eq!(e.kind(), clap::error::ErrorKind::ValueValidation);
        assert!(e.to_string().contains("0 would show nothing"), "{e}");
        let report = Cli::try_parse_from(["web_crawler", "report", "pages", "--limit", "0"]);
        assert!(report.is_err());
        assert!(Cli::try_parse_from(["web_crawler", "search", "csv", "--limit", "1"]).is_ok());
    }

    #[test]
    fn bad_arguments_exit_1_and_help_exits_0() {
        let code = |args: &[&str]| usage_exit_code(&Cli::try_parse_from(args).unwrap_err());
        for bad in [
            &["w", "crawl", "http://a/", "--concurrency", "abc"][..],
            &["w", "crawl"],
            &["w", "crawl", "http://a/", "--no-such-flag"],
            &["w"],
        ] {
            assert_eq!(code(bad), ExitCode::FAILURE, "{bad:?}");
        }
        assert_eq!(code(&["w", "--help"]), ExitCode::SUCCESS);
        assert_eq!(code(&["w", "crawl", "--help"]), ExitCode::SUCCESS);
        assert_eq!(code(&["w", "--version"]), ExitCode::SUCCESS);
    }

    #[test]
    fn a_negative_or_zero_count_says_what_the_flag_takes() {
        let refusal = |args: &[&str]| Cli::try_parse_from(args).unwrap_err().to_string();
        let e = refusal(&["w", "crawl", "http://a/", "--delay-ms", "-5"]);
        assert!(!e.contains("-- -5"), "advice that makes -5 a seed: {e}");
        assert!(
            e.contains("--delay-ms") && e.contains("give 0 or more"),
            "{e}"
        );
        for flag in ["--per-host", "--concurrency"] {
            let e = refusal(&["w", "crawl", "http://a/", flag, "0"]);
            assert!(e.contains(flag) && e.contains("give 1 or more"), "{e}");
        }
        let e = refusal(&["w", "crawl", "http://a/", "--timeout", "0"]);
        assert!(
            e.contains("--timeout") && e.contains("1 second or more"),
            "{e}"
        );
        let e = refusal(&["w", "crawl", "http://a/", "--max-pages", "-1"]);
        assert!(e.contains("give 0 or more"), "{e}");
    }

    #[test]
    fn only_a_crawl_says_its_store_is_created_if_missing() {
        use clap::CommandFactory;
        let mut cli = Cli::command();
        let mut help = |path: &[&str]| {
            let mut cmd = &mut cli;
            for name in path {
                cmd = cmd.find_subcommand_mut(name).unwrap();
            }
            cmd.render_long_help().to_string()
        };
        assert!(help(&["crawl"]).contains("created if missing"));
        for report in [&["report", "pages"][..], &["report", "graph"], &["search"]] {
            assert!(!help(report).contains("created if missing"), "{report:?}");
        }
    }

    #[test]
    fn each_command_has_its_own_store_outage_limit() {
        let limit = |args: &[&str]| match Cli::try_parse_from(args).unwrap().command {
            Command::Crawl(args) => args.opts.store_outage_limit,
            Command::Start(args) => args.store_outage_limit,
            other => panic!("{other:?}"),
        };
        assert_eq!(limit(&["w", "crawl", "http://a/"]), Duration::from_secs(60));
        let start = [
            "w",
            "start",
            "--name",
            "m",
            "--listen",
            "127.0.0.1:1",
            "--cookie-file",
            "c",
        ];
        assert_eq!(limit(&start), Duration::from_secs(600));
        let short = ["w", "crawl", "http://a/", "--store-outage-limit", "3s"];
        assert_eq!(limit(&short), Duration::from_secs(3));
    }

    #[test]
    fn a_store_failure_has_its_own_exit_code_and_one_line() {
        use web_crawler::actors::{StoreFailure, StoreFailureKind};
        let away = StoreFailure {
            kind: StoreFailureKind::Unreachable {
                limit: Duration::from_secs(3),
            },
            since: 0,
            cause: "MongoDB is unavailable: no server answered in time".into(),
        };
        let e = anyhow::Error::new(AppError::Store(away.clone())).context("the node stopped");
        let (code, line) = failure(&e);
        assert_eq!(code, ExitCode::from(EXIT_STORE_UNREACHABLE));
        assert_eq!(line, format!("error: {away}"));
        assert!(!line.contains('\n') && !line.contains("Kind:"), "{line}");
        let full = StoreFailure::permanent(0, "the store is full".into());
        let (code, _) = failure(&anyhow::Error::new(AppError::Store(full)));
        assert_eq!(code, ExitCode::from(EXIT_STORE_FAILED));
        let (code, line) = failure(&anyhow::anyhow!("no crawl database at x.db"));
        assert_eq!(code, ExitCode::FAILURE);
        assert_eq!(line, "error: no crawl database at x.db");
    }
}
