//! Continuous batching: many requests share each engine step.
//!
//! A [`Scheduler`] owns the [`Engine`](crate::engine::Engine). Requests arrive through a
//! cloneable [`Handle`]; each one takes a sequence slot, and every step packs one decode row
//! per generating sequence plus prompt chunks of sequences still prefilling (so a long prompt
//! never stalls running streams). Slots keep the tokens they hold after a request ends, and a
//! new request takes the free slot whose cached tokens share the longest prefix with its
//! prompt, so a follow-up turn re-evaluates only the new part ("cached tokens").
//!
//! The KV cache is paged ([`crate::kv_cache`]): a request is admitted when the block pool
//! has room for its prompt, and when running sequences outgrow the pool the most recently
//! submitted one is preempted — its blocks freed, it waits at the front of the queue and is
//! fed its prompt and generated tokens again later, so its stream is unchanged.
//!
//! Events go back through an [`EventSink`]; a sink that reports itself closed (the client went
//! away) cancels its sequence at the next step.

mod request;
mod run;
mod sequence;
pub(crate) mod slots;
mod stats;

pub use request::{Event, EventSink, Failure, Finish, MediaPrompt, Request, Summary, TokenInfo};
pub(crate) use run::prompt_problem;
pub use run::{Handle, Scheduler, SchedulerConfig, SubmitError};
pub use stats::{Histogram, Stats, StatsSnapshot};
