//! Helpers of the integration tests: generated test webs on distinct
//! 127.x.y.z addresses (`web`), the two store backends (`backend`), the
//! check that every real page of a web was fetched (`coverage`), polling.
//! The HTTP servers themselves are `web_crawler_testsupport`'s.
#![allow(dead_code, unreachable_pub)]

#[macro_use]
pub mod backend;
pub mod coverage;
pub mod web;

use std::time::Duration;

/// `var`'s value if it is set (scripts/test.sh sets it), else what
/// `scripts/SCRIPT ARGS…` prints (`script_args`: the script's name under
/// `scripts/`, then its arguments), installing or starting what the tests
/// need; panics with `need` if the script fails. Never skipped.
pub fn from_env_or_script(var: &str, script_args: &[&str], need: &str) -> String {
    if let Ok(value) = std::env::var(var) {
        return value;
    }
    let (script, args) = script_args.split_first().expect("a script");
    let path = format!("{}/scripts/{script}", env!("CARGO_MANIFEST_DIR"));
    let out = std::process::Command::new("bash")
        .arg(&path)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("run scripts/{script}: {e}"));
    assert!(
        out.status.success(),
        "{need}:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// Poll `cond` until it holds or `timeout` passes.
pub async fn wait_for(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + timeout;
    while tokio::time::Instant::now() < deadline {
        if cond() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    cond()
}

#[cfg(feature = "cli")]
/// The `web_crawler` binary, quiet, run from the temporary directory (a
/// MongoDB crawl's index defaults to the current one), killed with its test.
pub fn bin() -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_web_crawler"));
    cmd.env("RUST_LOG", "warn")
        .env_remove("MONGODB_URI")
        .current_dir(std::env::temp_dir())
        .kill_on_drop(true);
    cmd
}

/// Queue a run's seed, as the CLI's `crawl` and `start --seed` do: a seed
/// an earlier run on the same store processed is refused as
/// `already_known`, and the run resumes with what is pending.
pub async fn queue_seed(
    app: &web_crawler::AppHandle,
    url: &str,
    operation: web_crawler::OperationSpec,
) {
    match app.add_url_with(url, operation).await {
        Err(e) if e.code() == Some(web_crawler::actors::RefusalCode::AlreadyKnown) => {}
        answer => drop(answer.unwrap_or_else(|e| panic!("seed {url}: {e}"))),
    }
}
