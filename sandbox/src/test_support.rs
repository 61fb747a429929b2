//! For tests: whether the guest runtimes are installed. Tests that need them skip with a loud
//! message when they are absent, except under CI (`CI` set), where a missing runtime fails.

use crate::runtimes;

/// True when `python.wasm` and `quickjs.wasm` are in [`runtimes::default_dir`]; otherwise
/// prints a loud skip message (or panics when `CI` is set) and returns false.
pub fn runtimes_present(test: &str) -> bool {
    let dir = runtimes::default_dir();
    if runtimes::present(&dir) {
        return true;
    }
    if std::env::var_os("CI").is_some() {
        panic!(
            "{test}: the sandbox runtimes are missing from {}; CI requires them (run scripts/fetch-sandbox.sh)",
            dir.display()
        );
    }
    eprintln!(
        "\n*** SKIPPING {test}: the sandbox runtimes are missing from {} (run scripts/fetch-sandbox.sh) ***\n",
        dir.display()
    );
    false
}
