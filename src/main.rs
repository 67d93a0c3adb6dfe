//! The `web_crawler` command: glue between flags and the library.

mod cli;

use clap::Parser;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc keeps freed memory for 10 ms (its arenas 100 ms) before it
/// gives it back; under the indexer's churn that held a third of the
/// process (small web: 304 → 215 MB peak with the index, 131 → 94 MB
/// without, the same CPU). 0 gives it back at once.
fn return_freed_memory_at_once() {
    /// `mi_option_purge_delay` of mimalloc.h (v2), which libmimalloc-sys
    /// does not name.
    const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;
    #[allow(unsafe_code)]
    // SAFETY: sets an integer option, which mimalloc reads atomically.
    unsafe {
        libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 0);
    }
}

/// What is logged without `RUST_LOG`.
const DEFAULT_LOG: &str = "warn,web_crawler_actors::master=info,ractor_cluster=error";

fn main() -> std::process::ExitCode {
    return_freed_memory_at_once();
    let args = cli::Cli::parse();
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
    match runtime.block_on(cli::run(args)) {
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
