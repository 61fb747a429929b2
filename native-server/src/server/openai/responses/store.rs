//! Where responses created with `store: true` are kept, for `GET /v1/responses/{id}`, its
//! `input_items`, and `previous_response_id`. The handlers see only the [`ResponseStore`]
//! trait, so a database (the admin plane's, later) can take the in-memory store's place.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use super::types::{Item, ResponseObject};

/// One stored response and the conversation it answered.
#[derive(Clone, Debug)]
pub struct Stored {
    pub response: ResponseObject,
    /// The input it answered: the earlier responses' input and output (when it continued one),
    /// then its own request's items. Instructions are not items: they are not carried over.
    pub input: Vec<Item>,
}

impl Stored {
    /// The conversation a follow-up continues: the input, then this response's output.
    pub fn conversation(&self) -> Vec<Item> {
        self.input
            .iter()
            .chain(&self.response.output)
            .cloned()
            .collect()
    }

    /// About how many bytes it holds (its JSON size), for the store's bound.
    fn size(&self) -> usize {
        json_len(&self.response) + json_len(&self.input)
    }
}

fn json_len(v: &impl serde::Serialize) -> usize {
    serde_json::to_vec(v).map_or(0, |v| v.len())
}

/// Stored responses by id.
pub trait ResponseStore: Send + Sync {
    fn put(&self, r: Stored);
    fn get(&self, id: &str) -> Option<Arc<Stored>>;
    /// Whether there was one to delete.
    fn delete(&self, id: &str) -> bool;
}

/// At most this many responses are kept in memory...
pub const MAX_RESPONSES: usize = 1024;
/// ...holding at most this many bytes (their JSON size) together; the oldest go first. Every
/// stored response repeats its whole conversation, so a long chat continued turn by turn
/// takes room quadratic in its length: the byte bound is what keeps that in check.
pub const MAX_BYTES: usize = 64 << 20;

/// The in-memory store: the newest responses within [`MAX_RESPONSES`] and [`MAX_BYTES`].
pub struct MemoryStore {
    max_count: usize,
    max_bytes: usize,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    by_id: HashMap<String, (Arc<Stored>, usize)>,
    /// Ids, oldest first.
    order: VecDeque<String>,
    bytes: usize,
}

impl Default for MemoryStore {
    fn default() -> Self {
        MemoryStore::with_limits(MAX_RESPONSES, MAX_BYTES)
    }
}

impl MemoryStore {
    pub fn with_limits(max_count: usize, max_bytes: usize) -> Self {
        MemoryStore {
            max_count,
            max_bytes,
            inner: Mutex::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Inner {
    fn remove(&mut self, id: &str) -> bool {
        match self.by_id.remove(id) {
            Some((_, size)) => {
                self.bytes -= size;
                true
            }
            None => false,
        }
    }
}

impl ResponseStore for MemoryStore {
    fn put(&self, r: Stored) {
        let size = r.size();
        let id = r.response.id.clone();
        let mut g = self.lock();
        g.remove(&id);
        g.order.retain(|x| *x != id);
        g.bytes += size;
        g.by_id.insert(id.clone(), (Arc::new(r), size));
        g.order.push_back(id);
        // The newest one stays even when it alone is over the byte bound.
        while g.order.len() > 1 && (g.order.len() > self.max_count || g.bytes > self.max_bytes) {
            if let Some(old) = g.order.pop_front() {
                g.remove(&old);
            }
        }
    }

    fn get(&self, id: &str) -> Option<Arc<Stored>> {
        self.lock().by_id.get(id).map(|(r, _)| r.clone())
    }

    fn delete(&self, id: &str) -> bool {
        let mut g = self.lock();
        g.order.retain(|x| x != id);
        g.remove(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::openai::responses::input;

    fn stored(id: &str, text: &str) -> Stored {
        let mut r = super::super::create::sample_draft();
        r.id = id.into();
        Stored {
            response: r,
            input: input::parse(Some(&serde_json::json!(text))).unwrap(),
        }
    }

    #[test]
    fn oldest_go_first_past_the_count_and_byte_bounds() {
        let s = MemoryStore::with_limits(2, usize::MAX);
        for id in ["a", "b", "c"] {
            s.put(stored(id, "hi"));
        }
        assert!(s.get("a").is_none());
        assert!(s.get("b").is_some() && s.get("c").is_some());
        assert!(s.delete("b"));
        assert!(!s.delete("b"));
        assert!(s.get("b").is_none());

        let one = stored("x", "hi").size();
        let s = MemoryStore::with_limits(100, 2 * one + one / 2);
        for id in ["x", "y", "z"] {
            s.put(stored(id, "hi"));
        }
        assert!(s.get("x").is_none() && s.get("y").is_some() && s.get("z").is_some());
        // One response over the whole bound is still kept (alone).
        s.put(stored("big", &"w".repeat(4 * one)));
        assert!(s.get("big").is_some() && s.get("z").is_none());
    }

    #[test]
    fn the_conversation_is_the_input_then_the_output() {
        let mut s = stored("a", "question");
        s.response.output = vec![input::message(
            "assistant",
            vec![input::output_text("answer")],
        )];
        let c = s.conversation();
        assert_eq!(c.len(), 2);
        assert_eq!(c[1], s.response.output[0]);
    }
}
