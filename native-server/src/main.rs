use std::process::ExitCode;

fn main() -> ExitCode {
    weft_server::cli::main()
}
