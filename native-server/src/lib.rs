//! weft-server: the `weft` command line and (later) the HTTP server.

pub mod backends;
pub mod cli;
pub mod jobs;
pub mod registry;
pub mod server;
pub mod store;
