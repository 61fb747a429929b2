//! When a step is launched as a CUDA graph, and the cache of captured graphs: host-side logic,
//! kept apart from the driver calls (`backend/replay.rs`) so it is unit-tested without a GPU.
//!
//! A decode step is a few hundred small kernels; launched one by one, the CPU's launch time
//! rivals the GPU's work at small models and batch sizes. A captured graph replays them with one
//! launch. A graph freezes every kernel argument (pointers and launch shapes), so it is reused
//! only for a step with the same graph (ops, weights, shapes) and the same attention key bound
//! ([`key_bucket`]); the per-step data (token ids, positions, sequence slots) is copied into
//! device buffers the graph reads before each replay.

use weft_core::backend::{Graph, Op};

/// The environment variable that turns graphs off (`0`, `off`, `false`, `no`) for debugging.
pub const ENV: &str = "WEFT_CUDA_GRAPHS";

/// Steps with more rows than this run launch by launch: prompt steps are long enough that the
/// launch time is noise, and their graph would keep many rows of activations allocated.
pub const MAX_ROWS: usize = 64;

/// Graphs kept at once (least recently used dropped first): a server's decode steps take a few
/// batch sizes times a few key buckets.
pub const CAPACITY: usize = 32;

/// Whether graphs are on, from the value of [`ENV`] (on unless it says otherwise).
pub fn enabled_by(value: Option<&str>) -> bool {
    !matches!(
        value.map(|v| v.trim().to_ascii_lowercase()).as_deref(),
        Some("0" | "off" | "false" | "no")
    )
}

/// Whether graphs are on in this process ([`ENV`]).
pub fn enabled() -> bool {
    enabled_by(std::env::var(ENV).ok().as_deref())
}

/// The upper bound on keys per query that the attention launch is sized for: the step's
/// longest context rounded up to a power of two, at least 256. The split-K attention divides
/// this bound, not the exact key count, into splits, so a graph captured at one position is
/// valid for every later position up to the bound (splits past a query's keys are empty and
/// drop out of the combine), and a step launched with and without a graph splits the same way
/// (the same sums in the same order).
pub fn key_bucket(max_keys: u32) -> u32 {
    max_keys.max(1).next_power_of_two().max(256)
}

/// The key bound of a step whose rows sit at `positions` (a row at `p` attends at most `p + 1`
/// keys).
pub fn step_key_bound(positions: &[u32]) -> u32 {
    key_bucket(positions.iter().max().map_or(1, |&p| p.saturating_add(1)))
}

/// Why a step is not captured, or `Ok` when it may be.
pub fn capturable(graph: &Graph, enabled: bool, async_alloc: bool) -> Result<(), &'static str> {
    if !enabled {
        return Err("graphs are off (WEFT_CUDA_GRAPHS)");
    }
    // The step's temporary buffers are allocated and freed inside the capture; only the
    // stream-ordered allocator (cuMemAllocAsync) can be captured.
    if !async_alloc {
        return Err("the device has no stream-ordered allocator");
    }
    if graph.n_tokens > MAX_ROWS {
        return Err("a prompt step of many rows");
    }
    // Encoder steps change shape with every request's sequence lengths and are not repeated
    // token by token, so a capture would seldom be replayed.
    if graph
        .nodes
        .iter()
        .any(|n| matches!(n.op, Op::EncoderAttention { .. } | Op::Pool { .. }))
    {
        return Err("an encoder step");
    }
    Ok(())
}

/// What identifies a captured graph besides the step graph itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShapeKey {
    /// Rows of the step (the batch's tokens).
    pub rows: usize,
    /// [`step_key_bound`] of the step.
    pub key_bound: u32,
}

/// What to do with a step.
#[derive(Debug, PartialEq, Eq)]
pub enum Plan {
    /// Replay the captured graph in slot `i`.
    Replay(usize),
    /// Second sight of this shape: capture it (then replay it), storing it with
    /// [`GraphCache::store`] under slot `i`.
    Capture(usize),
    /// Launch kernel by kernel: first sight of the shape (one-off steps, such as a prompt's,
    /// are not worth a capture), or its capture failed before.
    Direct,
}

struct Slot<E> {
    key: ShapeKey,
    graph: Graph,
    state: State<E>,
    last_use: u64,
}

enum State<E> {
    SeenOnce,
    Captured(E),
    Failed,
}

/// Captured graphs by shape, at most `capacity` of them, with the shapes seen once. `E` is
/// the captured graph with its buffers (a type parameter so the bookkeeping is tested without
/// a device).
pub struct GraphCache<E> {
    slots: Vec<Slot<E>>,
    capacity: usize,
    clock: u64,
}

impl<E> GraphCache<E> {
    pub fn new(capacity: usize) -> Self {
        GraphCache {
            slots: Vec::new(),
            capacity: capacity.max(1),
            clock: 0,
        }
    }

    /// The plan for a step of `graph` with `key`; remembers the shape on first sight.
    pub fn plan(&mut self, key: ShapeKey, graph: &Graph) -> Plan {
        self.clock += 1;
        // The shape key first: comparing whole graphs (hundreds of nodes) only where the
        // cheap key matches.
        let found = self.slots.iter().position(|s| {
            s.key == key
                && s.graph.n_tokens == graph.n_tokens
                && s.graph.nodes == graph.nodes
                && s.graph.outputs == graph.outputs
        });
        match found {
            Some(i) => {
                self.slots[i].last_use = self.clock;
                match self.slots[i].state {
                    State::Captured(_) => Plan::Replay(i),
                    State::SeenOnce => Plan::Capture(i),
                    State::Failed => Plan::Direct,
                }
            }
            None => {
                if self.slots.len() >= self.capacity {
                    let oldest = (0..self.slots.len())
                        .min_by_key(|&i| self.slots[i].last_use)
                        .expect("capacity is at least 1");
                    // Dropping the slot releases its graph and buffers.
                    self.slots.swap_remove(oldest);
                }
                self.slots.push(Slot {
                    key,
                    graph: graph.clone(),
                    state: State::SeenOnce,
                    last_use: self.clock,
                });
                Plan::Direct
            }
        }
    }

    /// Stores the graph captured for slot `i` (from [`Plan::Capture`]).
    pub fn store(&mut self, i: usize, entry: E) {
        self.slots[i].state = State::Captured(entry);
    }

    /// Marks slot `i`'s capture as failed: its steps run kernel by kernel from now on.
    pub fn fail(&mut self, i: usize) {
        self.slots[i].state = State::Failed;
    }

    /// The captured graph of slot `i` (from [`Plan::Replay`]).
    pub fn get_mut(&mut self, i: usize) -> Option<&mut E> {
        match &mut self.slots.get_mut(i)?.state {
            State::Captured(e) => Some(e),
            _ => None,
        }
    }

    /// Captured graphs held.
    pub fn captured(&self) -> usize {
        self.slots
            .iter()
            .filter(|s| matches!(s.state, State::Captured(_)))
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weft_core::backend::{PoolMode, SeqSpan};

    fn decode_graph(rows: usize, scale: f32) -> Graph {
        let table = weft_core::backend::Weight {
            id: 0,
            ty: weft_core::dtype::GgmlType::F32,
            cols: 8,
            rows: 100,
        };
        let mut g = Graph::new(rows);
        let x = g.embed(table, 1.0);
        let y = g.scale(x, scale);
        g.output(y);
        g
    }

    #[test]
    fn env_values_turn_graphs_off() {
        assert!(enabled_by(None));
        assert!(enabled_by(Some("1")));
        for v in ["0", "off", "OFF", " false ", "no"] {
            assert!(!enabled_by(Some(v)), "{v}");
        }
    }

    #[test]
    fn key_buckets_are_powers_of_two_from_256() {
        assert_eq!(key_bucket(0), 256);
        assert_eq!(key_bucket(1), 256);
        assert_eq!(key_bucket(256), 256);
        assert_eq!(key_bucket(257), 512);
        assert_eq!(key_bucket(5000), 8192);
        assert_eq!(step_key_bound(&[3, 700, 12]), 1024);
        assert_eq!(step_key_bound(&[]), 256);
        // A whole decode run within one bucket keeps one graph.
        assert!((300..=511).all(|p| step_key_bound(&[p]) == 512));
    }

    #[test]
    fn what_is_captured() {
        let g = decode_graph(4, 1.0);
        assert_eq!(capturable(&g, true, true), Ok(()));
        assert!(capturable(&g, false, true).is_err());
        assert!(capturable(&g, true, false).is_err());
        assert!(capturable(&decode_graph(MAX_ROWS, 1.0), true, true).is_ok());
        assert!(capturable(&decode_graph(MAX_ROWS + 1, 1.0), true, true).is_err());
        let mut enc = decode_graph(4, 1.0);
        let span = SeqSpan {
            start: 0,
            len: 4,
            valid: 4,
        };
        let p = enc.pool(weft_core::backend::TensorId(0), vec![span], PoolMode::Mean);
        enc.output(p);
        assert_eq!(capturable(&enc, true, true), Err("an encoder step"));
    }

    #[test]
    fn captured_on_second_sight_and_replayed_after() {
        let mut c: GraphCache<&str> = GraphCache::new(4);
        let key = ShapeKey {
            rows: 1,
            key_bound: 256,
        };
        let g = decode_graph(1, 1.0);
        assert_eq!(c.plan(key, &g), Plan::Direct);
        let Plan::Capture(i) = c.plan(key, &g) else {
            panic!("second sight must capture")
        };
        c.store(i, "graph A");
        assert_eq!(c.plan(key, &g), Plan::Replay(i));
        assert_eq!(c.get_mut(i).copied(), Some("graph A"));
        // Another key bound, another batch size, or another graph is another shape.
        let longer = ShapeKey {
            key_bound: 512,
            ..key
        };
        assert_eq!(c.plan(longer, &g), Plan::Direct);
        assert_eq!(c.plan(key, &decode_graph(1, 2.0)), Plan::Direct);
        assert_eq!(c.captured(), 1);
    }

    #[test]
    fn failed_captures_run_direct() {
        let mut c: GraphCache<()> = GraphCache::new(4);
        let key = ShapeKey {
            rows: 2,
            key_bound: 256,
        };
        let g = decode_graph(2, 1.0);
        c.plan(key, &g);
        let Plan::Capture(i) = c.plan(key, &g) else {
            panic!()
        };
        c.fail(i);
        assert_eq!(c.plan(key, &g), Plan::Direct);
        assert_eq!(c.plan(key, &g), Plan::Direct);
        assert!(c.get_mut(i).is_none());
    }

    #[test]
    fn least_recently_used_is_dropped() {
        let mut c: GraphCache<u32> = GraphCache::new(2);
        let key = |rows| ShapeKey {
            rows,
            key_bound: 256,
        };
        let (g1, g2, g3) = (
            decode_graph(1, 1.0),
            decode_graph(2, 1.0),
            decode_graph(3, 1.0),
        );
        for (k, g, v) in [(key(1), &g1, 1), (key(2), &g2, 2)] {
            c.plan(k, g);
            let Plan::Capture(i) = c.plan(k, g) else {
                panic!()
            };
            c.store(i, v);
        }
        // Use 1 again, so 2 is the oldest when 3 arrives.
        assert!(matches!(c.plan(key(1), &g1), Plan::Replay(_)));
        assert_eq!(c.plan(key(3), &g3), Plan::Direct);
        assert!(matches!(c.plan(key(1), &g1), Plan::Replay(_)));
        assert_eq!(c.plan(key(2), &g2), Plan::Direct, "2 was dropped");
        assert_eq!(c.captured(), 1);
    }
}
