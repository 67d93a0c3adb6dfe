//! The `web_crawler` command: glue between flags and the library.

mod cli;

use clap::Parser;

/// glibc's allocator, held small: at most two malloc arenas (glibc's
/// default is eight per core, each holding its own freed memory), freed
/// memory above 128 KiB at the top of an arena given back at once (the
/// threshold otherwise grows to 32 MiB after large frees), and 4 MiB of
/// pad on each growth so that the indexer's churn does not fault pages in
/// and out at every step. On the bench's small web (two runs each): 155–162
/// MB peak with the index and 68 MB without, at 9.8–9.9 CPU-s; mimalloc
/// (used before): 210–221 and 102–106 MB at 9.6–9.8 CPU-s; glibc's
/// defaults: 195 and 72 MB.
fn hold_the_heap_small() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[allow(unsafe_code)]
    // SAFETY: mallopt sets allocator options; it runs first in `main`,
    // before any other thread exists.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 128 * 1024);
        libc::mallopt(libc::M_TOP_PAD, 4 * 1024 * 1024);
    }
}

/// What is logged without `RUST_LOG`.
const DEFAULT_LOG: &str = "warn,web_crawler_actors::master=info,ractor_cluster=error";

fn main() -> std::process::ExitCode {
    hold_the_heap_small();
    let args = match cli::Cli::try_parse() {
        Ok(args) => args,
        Err(e) => return cli::usage(&e),
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                // Warnings, and the master's notices: a node joining (as
                // one leaving is a warning), hosts moving, a host serving
                // soft 404s, a watched URL's change. The cluster library's
                // own WARN lines (every closed session) are replaced by the
                // node's session log (cluster.rs).
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(DEFAULT_LOG)),
        )
        .with_writer(std::io::stderr)
        // No colour codes in a log file or a pipe.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let outcome = runtime.block_on(cli::run(args));
    if outcome.is_err() {
        // A failed command has nothing left to finish, and dropping the
        // runtime could print a panic after its one line: a MongoDB client
        // dropped just before ends its sessions on a blocking thread, which
        // panics when the runtime's tasks go away under it.
        std::mem::forget(runtime);
    }
    match outcome {
        Ok(code) => code,
        // `web_crawler report pages | head`: a closed pipe is not an error.
        Err(e)
            if e.chain().any(|c| {
                c.downcast_ref::<std::io::Error>()
                    .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            }) =>
        {
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            let (code, line) = cli::failure(&e);
            eprintln!("{line}");
            code
        }
    }
}
