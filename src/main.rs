//! The `web_crawler` command: glue between flags and the library.

mod cli;

use clap::Parser;

/// jemalloc for the whole process, SQLite's C allocations included: glibc's
/// arenas spent a sixth of the crawl's CPU on the page buffers' churn
/// (`_int_malloc`, `malloc_consolidate`, arena locks). On the large bench web
/// (bench/README, 2026-11-29, two quiet alternated pairs) it took the
/// `--no-index` crawl from 66–75 to 53–57 CPU-s, for about 22 MB more
/// anonymous memory at the peak (150–155 MB).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's options, read before `main` runs: two arenas (its default,
/// four a core, held 7–10 MB more at the peak for no speed), freed pages
/// returned after 300 ms by a background thread rather than by the
/// threads that free them, and not kept lazily after that.
#[allow(unsafe_code)]
// SAFETY: jemalloc reads this symbol as its `const char *malloc_conf`: a
// pointer to a NUL-terminated string, which a reference to a byte array is.
#[unsafe(export_name = "malloc_conf")]
pub static MALLOC_CONF: &[u8; 69] =
    b"background_thread:true,narenas:2,dirty_decay_ms:300,muzzy_decay_ms:0\0";

/// What is logged without `RUST_LOG`.
const DEFAULT_LOG: &str = "warn,web_crawler_actors::master=info,ractor_cluster=error";

fn main() -> std::process::ExitCode {
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
