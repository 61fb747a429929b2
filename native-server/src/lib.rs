//! weft-server: the `weft` command line and the HTTP server.

pub mod backends;
pub mod cli;
pub mod server;
pub mod video_gen;

// The models a server holds live in their own crate; these names keep `weft_server::registry`
// and friends for the command line and the tests.
pub use weft_registry::{jobs, registry, store};
