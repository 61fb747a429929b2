//! The security suite (issue "One trust model"): each attack the review found, tried again
//! over real HTTP against the real `weft serve`, on SQLite and on Postgres where the database
//! matters. One module per layer of the trust model:
//!
//! - `sandbox`: the code sandbox holds its quota (growth without writes, links, concurrent runs);
//! - `owners`: everything stored has an owner; other principals get 404;
//! - `cross_site`: open mode accepts only loopback `Host`s and same-origin state changes;
//! - `bounds`: every input is bounded before it is buffered (fields, uploads, archives, audit);
//! - `pull`: pulls refuse private destinations and foreign redirects, and never store secrets;
//! - `authz`: every route of the OpenAPI document × every kind of caller, against a table;
//! - `vision`: images are bounded before they are decoded (bombs, counts, bytes, context).
//!
//! Network tests use loopback addresses only.

#[path = "../server_admin/harness.rs"]
#[allow(dead_code)]
mod harness;

mod authz;
mod bounds;
mod cross_site;
mod owners;
mod pull;
mod sandbox;
mod vision;
