//! The paged KV cache on a real model: a sequence whose pool blocks are interleaved with
//! another's gives bit-identical logits to the same sequence alone, and an exhausted pool is a
//! typed error that leaves every sequence as it was.

use std::sync::Arc;

use weft_core::backend::cpu::CpuBackend;
use weft_core::backend::{KvDtype, KV_BLOCK};
use weft_core::engine::{Engine, EngineConfig, EngineError, Row};
use weft_core::gguf::ModelFile;
use weft_core::kv_cache::{KvCacheConfig, KvError};
use weft_core::test_support::model_path;

const CHUNK: usize = 16;

fn engine(file: &Arc<ModelFile>, n_ctx: usize, n_seq: usize, pool: usize) -> Engine {
    let cfg = EngineConfig {
        kv: KvCacheConfig {
            n_ctx,
            n_seq,
            dtype: KvDtype::F16,
            pool_tokens: Some(pool),
        },
        max_batch: 64,
    };
    Engine::load(
        file.clone(),
        Box::new(CpuBackend::new(2)),
        cfg,
        &mut |_, _| {},
    )
    .unwrap()
}

/// Deterministic token ids inside the model's vocabulary.
fn tokens(n: usize, salt: u32) -> Vec<u32> {
    (0..n as u32)
        .map(|i| 100 + (i * 37 + salt * 11) % 900)
        .collect()
}

/// Feeds `chunk` to `seq` in one step; the logits of its last row.
fn feed(e: &mut Engine, seq: u32, chunk: &[u32]) -> Vec<f32> {
    let rows: Vec<Row> = chunk
        .iter()
        .enumerate()
        .map(|(i, &token)| Row {
            seq,
            token,
            logits: i + 1 == chunk.len(),
        })
        .collect();
    e.step(&rows).unwrap().pop().unwrap()
}

fn argmax(l: &[f32]) -> u32 {
    (0..l.len()).max_by(|&a, &b| l[a].total_cmp(&l[b])).unwrap() as u32
}

/// Prompt chunks then greedy decode steps of one sequence, calling `between` before each of
/// its steps (to let another sequence take blocks). Returns every step's logits.
fn run(e: &mut Engine, seq: u32, between: &mut dyn FnMut(&mut Engine, usize)) -> Vec<Vec<f32>> {
    let mut out = Vec::new();
    for (i, c) in tokens(150, 1).chunks(CHUNK).enumerate() {
        between(e, i);
        out.push(feed(e, seq, c));
    }
    for i in 0..20 {
        let t = argmax(out.last().unwrap());
        between(e, 100 + i);
        out.push(feed(e, seq, &[t]));
    }
    out
}

fn interleaved_blocks_change_no_bits(key: &str) {
    let Some(path) = model_path(key) else {
        return;
    };
    let file = Arc::new(ModelFile::open(&path).unwrap());

    let mut solo = engine(&file, 256, 1, 256);
    let a = solo.new_sequence().unwrap();
    let want = run(&mut solo, a, &mut |_, _| {});

    // Sequence b feeds a chunk before each of a's steps, so the two take pool blocks in turn;
    // a third sequence holds blocks early on and then gives them back, leaving holes a fills.
    let mut shared = engine(&file, 256, 3, 12 * KV_BLOCK);
    let (a, b, c) = (
        shared.new_sequence().unwrap(),
        shared.new_sequence().unwrap(),
        shared.new_sequence().unwrap(),
    );
    let other = tokens(120, 2);
    let mut fed_b = 0;
    let got = run(&mut shared, a, &mut |e, i| {
        if i == 0 {
            e.prefill(c, &tokens(2 * KV_BLOCK, 3)).unwrap();
        }
        if i == 6 {
            e.free_sequence(c).unwrap();
        }
        if fed_b < other.len() {
            feed(e, b, &other[fed_b..fed_b + CHUNK.min(other.len() - fed_b)]);
            fed_b += CHUNK;
        }
    });
    let table = shared.seqs().table(a).unwrap().to_vec();
    assert!(
        table.windows(2).any(|w| w[1] != w[0] + 1),
        "{key}: blocks {table:?} are not scattered"
    );
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert!(
            g.iter().zip(w).all(|(x, y)| x.to_bits() == y.to_bits()),
            "{key}: step {i} differs"
        );
    }
}

#[test]
fn smollm2_interleaved_blocks_change_no_bits() {
    interleaved_blocks_change_no_bits("smollm2");
}

/// Gemma 3 mixes sliding-window layers (per-slot rings) with full-attention ones (the pool).
#[test]
fn gemma3_interleaved_blocks_change_no_bits() {
    interleaved_blocks_change_no_bits("gemma3");
}

#[test]
fn an_exhausted_pool_is_a_typed_error_and_changes_nothing() {
    let Some(path) = model_path("smollm2") else {
        return;
    };
    let file = Arc::new(ModelFile::open(&path).unwrap());
    // Two sequences of up to two blocks each share a pool of two blocks.
    let mut e = engine(&file, 2 * KV_BLOCK, 2, 2 * KV_BLOCK);
    let (a, b) = (e.new_sequence().unwrap(), e.new_sequence().unwrap());
    e.prefill(a, &tokens(KV_BLOCK + 10, 1)).unwrap();
    let full = EngineError::Kv(KvError::PoolFull {
        needed: 1,
        free: 0,
        total: 2,
    });
    assert_eq!(e.prefill(b, &tokens(5, 2)), Err(full.clone()));
    // A step mixing a row that fits with one that does not takes nothing.
    let rows = [
        Row {
            seq: a,
            token: 5,
            logits: true,
        },
        Row {
            seq: b,
            token: 6,
            logits: true,
        },
    ];
    assert_eq!(e.step(&rows), Err(full));
    assert_eq!(e.seqs().len(a).unwrap(), KV_BLOCK + 10);
    assert_eq!(e.seqs().len(b).unwrap(), 0);
    assert_eq!(e.seqs().free_blocks(), 0);
    // a goes on inside its blocks; once it is gone, b gets them.
    e.decode(a, 7).unwrap();
    e.free_sequence(a).unwrap();
    assert_eq!(e.seqs().free_blocks(), 2);
    e.prefill(b, &tokens(5, 2)).unwrap();
    assert_eq!(e.seqs().table(b).unwrap().len(), 1);
}

/// A sequence that starts from a copy of another's cached prefix, then takes the rest of its
/// prompt and decodes, gives bit-identical logits to one that computed the whole prompt. The
/// engine's batch is small so that, on Gemma 3, the prefix is longer than a sliding layer's
/// ring and the copy wraps around it.
fn a_copied_prefix_gives_the_logits_of_computing_it(key: &str, prefix: usize) {
    let Some(path) = model_path(key) else {
        return;
    };
    let file = Arc::new(ModelFile::open(&path).unwrap());
    let cfg = EngineConfig {
        kv: KvCacheConfig {
            n_ctx: 1024,
            n_seq: 3,
            dtype: KvDtype::F16,
            pool_tokens: Some(3 * 1024),
        },
        max_batch: 16,
    };
    let mut e = Engine::load(
        file.clone(),
        Box::new(CpuBackend::new(2)),
        cfg,
        &mut |_, _| {},
    )
    .unwrap();
    let (donor, copy, fresh) = (
        e.new_sequence().unwrap(),
        e.new_sequence().unwrap(),
        e.new_sequence().unwrap(),
    );
    let start = tokens(prefix, 5);
    let rest = tokens(20, 6);
    // The donor holds the prefix and then a few tokens of its own (which the copy leaves out).
    let mut donor_tokens = start.clone();
    donor_tokens.extend(tokens(5, 7));
    e.prefill(donor, &donor_tokens).unwrap();
    // Something in the copy's slot before, which the copy replaces.
    e.prefill(copy, &tokens(30, 8)).unwrap();

    let mut whole = start.clone();
    whole.extend(&rest);
    let decode = |e: &mut Engine, seq: u32, first: Vec<f32>| {
        let mut out = vec![first];
        for _ in 0..5 {
            let t = argmax(out.last().unwrap());
            out.push(e.decode(seq, t).unwrap());
        }
        out
    };
    let first = e.prefill(fresh, &whole).unwrap();
    let want = decode(&mut e, fresh, first);

    e.copy_prefix(donor, copy, prefix).unwrap();
    assert_eq!(e.seqs().len(copy).unwrap(), prefix);
    let first = e.prefill(copy, &rest).unwrap();
    let got = decode(&mut e, copy, first);
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert!(
            g.iter().zip(w).all(|(x, y)| x.to_bits() == y.to_bits()),
            "{key}: step {i} after a copied prefix differs"
        );
    }

    // Refused copies change nothing.
    let held = e.seqs().len(copy).unwrap();
    assert!(e.copy_prefix(donor, donor, 3).is_err());
    assert!(e.copy_prefix(donor, copy, donor_tokens.len() + 1).is_err());
    assert_eq!(e.seqs().len(copy).unwrap(), held);
    assert_eq!(e.seqs().len(donor).unwrap(), donor_tokens.len());
}

#[test]
fn smollm2_a_copied_prefix_gives_the_logits_of_computing_it() {
    a_copied_prefix_gives_the_logits_of_computing_it("smollm2", 150);
}

/// 600 positions: past the sliding layers' ring of 512 + 16.
#[test]
fn gemma3_a_copied_prefix_gives_the_logits_of_computing_it() {
    a_copied_prefix_gives_the_logits_of_computing_it("gemma3", 600);
}
