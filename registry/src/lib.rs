//! weft-registry: the models a `weft` server or command holds, with no HTTP in it.
//!
//! - [`registry`]: the catalog of names and the live registry that loads, leases and unloads
//!   models (text and embedding), with keep-alive and memory accounting;
//! - [`store`]: the models directory on disk — pull, import, convert and quantize, and the
//!   pull policy that keeps a pull on the hosts it may reach;
//! - [`jobs`]: long model work (pull, import, quantize) run on threads with progress,
//!   cancellation and an owner.

pub mod jobs;
pub mod registry;
pub mod store;
