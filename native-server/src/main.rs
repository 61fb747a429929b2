use std::process::ExitCode;

fn main() -> ExitCode {
    // Behave like other Unix tools when output is piped into `head`: exit quietly on a closed pipe.
    #[cfg(unix)]
    // SAFETY: restoring the default disposition of one signal at start-up, before any threads.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    weft_server::cli::main()
}
