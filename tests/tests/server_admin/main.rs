//! The admin plane and auth against the real `weft serve`, each test run twice: on the
//! embedded SQLite (the default `$WEFT_HOME/weft.db`) and on a real Postgres the test starts.
//! Keys are bootstrapped with `weft keys create` or `WEFT_ADMIN_KEY`.

mod ab;
mod adapters;
mod aliases;
mod backup;
mod harness;
mod inputs;
mod jobs;
mod limits;
mod logs;
mod matrix;
mod moderation;
mod reference_shapes;
mod replicas;
mod restart;
mod sessions;
mod settings;
mod shared_limits;
mod soak;
mod tenancy;
mod tenancy_models;
mod zips;
