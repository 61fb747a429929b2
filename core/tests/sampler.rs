//! Properties of the sampler chain, checked against straightforward reference computations
//! over many random logit vectors.

use std::collections::HashSet;

use weft_core::gguf::ModelFile;
use weft_core::sampler::{apply_penalties, argmax, Rng, Sampler, SamplerConfig, StopMatcher};
use weft_core::test_support::model_path;
use weft_core::tokenizer::Tokenizer;

/// Random logits; `levels` > 0 quantizes them so that ties occur.
fn logits(rng: &mut Rng, n: usize, levels: u32) -> Vec<f32> {
    (0..n)
        .map(|_| {
            let x = (rng.next_f64() * 20.0 - 10.0) as f32;
            if levels > 0 {
                (x * levels as f32 / 20.0).round()
            } else {
                x
            }
        })
        .collect()
}

/// Token ids by logit, highest first, ties (-0.0 and 0.0 included) by lower id.
fn ranked(l: &[f32]) -> Vec<u32> {
    let mut ids: Vec<u32> = (0..l.len() as u32).collect();
    ids.sort_by(|&a, &b| {
        l[b as usize]
            .partial_cmp(&l[a as usize])
            .unwrap()
            .then(a.cmp(&b))
    });
    ids
}

fn softmax(l: &[f32], t: f64) -> Vec<f64> {
    let m = l.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
    let w: Vec<f64> = l.iter().map(|&x| ((x as f64 - m) / t).exp()).collect();
    let s: f64 = w.iter().sum();
    w.iter().map(|x| x / s).collect()
}

#[test]
fn greedy_is_argmax() {
    let mut rng = Rng::new(1);
    for trial in 0..200 {
        let l = logits(&mut rng, 1000, if trial % 2 == 0 { 0 } else { 8 });
        let want = ranked(&l)[0];
        assert_eq!(argmax(&l), want);
        let mut s = Sampler::new(SamplerConfig::greedy()).unwrap();
        assert_eq!(s.sample(&mut l.clone(), &[]), want, "trial {trial}");
    }
}

#[test]
fn top_k_one_is_greedy_at_any_temperature() {
    let mut rng = Rng::new(2);
    for trial in 0..200 {
        let l = logits(&mut rng, 500, if trial % 2 == 0 { 0 } else { 4 });
        let cfg = SamplerConfig {
            temperature: 1.5,
            top_k: 1,
            seed: Some(trial),
            ..Default::default()
        };
        let mut s = Sampler::new(cfg).unwrap();
        assert_eq!(s.sample(&mut l.clone(), &[]), argmax(&l), "trial {trial}");
    }
}

#[test]
fn top_k_partial_selection_equals_full_sort() {
    let mut rng = Rng::new(3);
    for trial in 0..300 {
        let n = 1 + (rng.next_u64() % 3000) as usize;
        let k = 1 + (rng.next_u64() % 200) as usize;
        let l = logits(&mut rng, n, if trial % 3 == 0 { 0 } else { 6 });
        let cfg = SamplerConfig {
            temperature: 1.0,
            top_k: k,
            top_p: 1.0,
            min_p: 0.0,
            seed: Some(trial),
            ..Default::default()
        };
        let mut s = Sampler::new(cfg).unwrap();
        s.sample(&mut l.clone(), &[]);
        let got: Vec<u32> = s.distribution().iter().map(|c| c.id).collect();
        let want: Vec<u32> = ranked(&l).into_iter().take(k).collect();
        assert_eq!(got, want, "trial {trial}: n {n} k {k}");
    }
}

#[test]
fn top_p_and_min_p_keep_what_the_definitions_say() {
    let mut rng = Rng::new(4);
    for trial in 0..300 {
        let l = logits(&mut rng, 400, 0);
        let top_k = [0, 50][trial % 2];
        let top_p = [1.0, 0.9, 0.5, 0.2][trial / 2 % 4];
        let min_p = [0.0, 0.05, 0.3][trial / 8 % 3];
        let cfg = SamplerConfig {
            temperature: 0.7,
            top_k,
            top_p,
            min_p,
            seed: Some(trial as u64),
            ..Default::default()
        };
        let mut s = Sampler::new(cfg).unwrap();
        let picked = s.sample(&mut l.clone(), &[]);

        // Reference: llama.cpp's order, written plainly on a fully sorted list.
        let mut ids = ranked(&l);
        if top_k > 0 {
            ids.truncate(top_k);
        }
        let sub: Vec<f32> = ids.iter().map(|&i| l[i as usize]).collect();
        let p = softmax(&sub, 1.0);
        let mut keep = ids.len();
        if top_p < 1.0 {
            let mut cum = 0.0;
            for (i, pi) in p.iter().enumerate() {
                cum += pi;
                if cum >= top_p as f64 {
                    keep = i + 1;
                    break;
                }
            }
        }
        if min_p > 0.0 {
            let m = p
                .iter()
                .take_while(|&&pi| pi >= min_p as f64 * p[0])
                .count();
            keep = keep.min(m.max(1));
        }
        let want: HashSet<u32> = ids[..keep].iter().copied().collect();
        let got: HashSet<u32> = s.distribution().iter().map(|c| c.id).collect();
        assert_eq!(
            got, want,
            "trial {trial}: top_k {top_k} top_p {top_p} min_p {min_p}"
        );
        assert!(want.contains(&picked));
        let total: f32 = s.distribution().iter().map(|c| c.p).sum();
        assert!((total - 1.0).abs() < 1e-4, "probabilities sum to {total}");
    }
}

#[test]
fn same_seed_same_tokens_different_seed_different_tokens() {
    let mut rng = Rng::new(5);
    let l = logits(&mut rng, 2000, 0);
    let run = |seed: u64| -> Vec<u32> {
        let cfg = SamplerConfig {
            temperature: 1.0,
            top_k: 0,
            top_p: 0.98,
            min_p: 0.0,
            repeat_penalty: 1.1,
            seed: Some(seed),
            ..Default::default()
        };
        let mut s = Sampler::new(cfg).unwrap();
        let mut hist = Vec::new();
        for _ in 0..300 {
            let t = s.sample(&mut l.clone(), &hist);
            hist.push(t);
        }
        hist
    };
    assert_eq!(run(42), run(42));
    assert_ne!(run(42), run(43));
    // A sampler without a seed reports the one it drew, and replaying it gives the same run.
    let mut s = Sampler::new(SamplerConfig::unfiltered(0)).unwrap();
    s.reseed(7);
    let a: Vec<u32> = (0..50).map(|_| s.sample(&mut l.clone(), &[])).collect();
    let mut s2 = Sampler::new(SamplerConfig {
        seed: None,
        ..SamplerConfig::unfiltered(0)
    })
    .unwrap();
    s2.reseed(s.seed());
    let b: Vec<u32> = (0..50).map(|_| s2.sample(&mut l.clone(), &[])).collect();
    assert_eq!(a, b);
}

#[test]
fn draws_follow_the_distribution() {
    let l = [2.0f32, 1.0, 0.5, 0.0, -1.0, f32::NEG_INFINITY];
    for &t in &[1.0f32, 0.5, 2.0] {
        let want = softmax(&l, t as f64);
        let mut s = Sampler::new(SamplerConfig {
            temperature: t,
            ..SamplerConfig::unfiltered(99)
        })
        .unwrap();
        let n = 200_000;
        let mut counts = [0usize; 6];
        for _ in 0..n {
            counts[s.sample(&mut l.to_vec(), &[]) as usize] += 1;
        }
        for (i, &c) in counts.iter().enumerate() {
            let f = c as f64 / n as f64;
            // 5 standard deviations of a binomial proportion.
            let tol = 5.0 * (want[i] * (1.0 - want[i]) / n as f64).sqrt() + 1e-9;
            assert!(
                (f - want[i]).abs() <= tol,
                "T {t}: token {i} drawn {f}, expected {}",
                want[i]
            );
        }
        assert_eq!(counts[5], 0, "a -inf logit is never drawn");
        let dist = s.distribution();
        for c in dist {
            assert!((c.p as f64 - want[c.id as usize]).abs() < 1e-6);
        }
    }
}

#[test]
fn penalties_change_exactly_the_penalised_ids() {
    let mut rng = Rng::new(6);
    for trial in 0..100 {
        let l = logits(&mut rng, 300, 0);
        let hist: Vec<u32> = (0..50).map(|_| (rng.next_u64() % 300) as u32).collect();
        let last_n = [-1i64, 0, 10, 64][trial % 4];
        let cfg = SamplerConfig {
            repeat_penalty: 1.3,
            presence_penalty: 0.5,
            frequency_penalty: 0.25,
            penalty_last_n: last_n,
            ..Default::default()
        };
        let window: &[u32] = match last_n {
            -1 => &hist,
            n => &hist[hist.len().saturating_sub(n as usize)..],
        };
        let mut got = l.clone();
        apply_penalties(&mut got, &hist, &cfg, &mut Default::default());
        for (id, (&before, &after)) in l.iter().zip(&got).enumerate() {
            let count = window.iter().filter(|&&t| t == id as u32).count();
            if count == 0 {
                assert_eq!(
                    before.to_bits(),
                    after.to_bits(),
                    "id {id} not in window changed"
                );
            } else {
                let r = if before <= 0.0 {
                    before * 1.3
                } else {
                    before / 1.3
                };
                let want = r - (count as f32 * 0.25 + 0.5);
                assert_eq!(after, want, "id {id}, count {count}");
                assert!(after < before, "a penalty lowers the logit");
            }
        }
    }
}

#[test]
fn sample_edits_only_penalised_and_biased_logits() {
    let mut rng = Rng::new(7);
    let l = logits(&mut rng, 100, 0);
    let cfg = SamplerConfig {
        repeat_penalty: 1.2,
        logit_bias: [(3, 2.0), (4, f32::NEG_INFINITY), (1000, 1.0)].into(),
        seed: Some(1),
        ..Default::default()
    };
    let mut s = Sampler::new(cfg).unwrap();
    let mut edited = l.clone();
    s.sample(&mut edited, &[10, 20, 10]);
    let changed: Vec<usize> = (0..100).filter(|&i| l[i] != edited[i]).collect();
    assert_eq!(changed, vec![3, 4, 10, 20]);
    assert_eq!(edited[3], l[3] + 2.0);
    assert_eq!(edited[4], f32::NEG_INFINITY);
}

#[test]
fn banned_token_is_never_sampled() {
    let l = vec![5.0f32, 0.0, 0.0];
    let cfg = SamplerConfig {
        logit_bias: [(0, f32::NEG_INFINITY)].into(),
        ..SamplerConfig::unfiltered(3)
    };
    let mut s = Sampler::new(cfg.clone()).unwrap();
    for _ in 0..1000 {
        assert_ne!(s.sample(&mut l.clone(), &[]), 0);
    }
    let mut greedy = Sampler::new(SamplerConfig {
        temperature: 0.0,
        ..cfg
    })
    .unwrap();
    assert_eq!(greedy.sample(&mut l.clone(), &[]), 1);
    // Everything banned: a defined answer, not a panic.
    let mut all = vec![f32::NEG_INFINITY; 4];
    assert_eq!(s.sample(&mut all, &[]), 0);
}

#[test]
fn logprobs_of_the_final_distribution() {
    let l = [3.0f32, 1.0, 2.0, -5.0];
    let mut s = Sampler::new(SamplerConfig {
        top_k: 3,
        ..SamplerConfig::unfiltered(0)
    })
    .unwrap();
    s.sample(&mut l.to_vec(), &[]);
    let top = s.top_logprobs(5);
    let want = softmax(&l[..3], 1.0);
    assert_eq!(top.iter().map(|t| t.0).collect::<Vec<_>>(), vec![0, 2, 1]);
    assert!((top[0].1 as f64 - want[0].ln()).abs() < 1e-5);
    assert!((top[2].1 as f64 - want[1].ln()).abs() < 1e-5);
}

#[test]
fn bad_settings_are_errors() {
    for cfg in [
        SamplerConfig {
            temperature: -1.0,
            ..Default::default()
        },
        SamplerConfig {
            top_p: 0.0,
            ..Default::default()
        },
        SamplerConfig {
            min_p: 1.5,
            ..Default::default()
        },
        SamplerConfig {
            repeat_penalty: 0.0,
            ..Default::default()
        },
        SamplerConfig {
            penalty_last_n: -2,
            ..Default::default()
        },
    ] {
        assert!(Sampler::new(cfg.clone()).is_err(), "{cfg:?}");
    }
    let cfg: SamplerConfig =
        serde_json::from_str(r#"{"temperature": 0.2, "logit_bias": {"50": -100}}"#).unwrap();
    assert_eq!(cfg.top_k, 40);
    assert_eq!(cfg.logit_bias[&50], -100.0);
    assert!(serde_json::from_str::<SamplerConfig>(r#"{"temprature": 1}"#).is_err());
}

#[test]
fn stop_strings_split_across_token_pieces() {
    let pieces = [
        "Sure", "! The", " end", ".\n", "<|", "im", "_end", "|>", "junk",
    ];
    let mut m = StopMatcher::new(["<|im_end|>", "\n\n\n"]);
    let mut out = String::new();
    let mut stopped = None;
    for p in pieces {
        let step = m.push(p);
        out.push_str(&step.text);
        if step.stopped.is_some() {
            stopped = step.stopped;
            break;
        }
    }
    assert_eq!(out, "Sure! The end.\n");
    assert_eq!(stopped, Some(0));
}

/// The one end-of-generation set (the tokenizer's, llama.cpp's rules). SmolLM2's includes its
/// FIM repository token `<reponame>` (4), as llama.cpp's does; before the lists were merged,
/// a second metadata-only list left it out, but `weft run` and the server already stopped on it.
#[test]
fn end_of_generation_tokens_from_metadata() {
    let expect: [(&str, &[u32]); 3] = [
        ("gemma3", &[1, 106]),
        ("qwen2", &[151643, 151645, 151662, 151663, 151664]),
        ("smollm2", &[0, 2, 4]),
    ];
    for (key, want) in expect {
        let Some(path) = model_path(key) else {
            continue;
        };
        let file = ModelFile::open(&path).unwrap();
        let tok = Tokenizer::from_gguf(&file.gguf).unwrap();
        assert_eq!(tok.eog_ids(), want, "{key}");
    }
}

/// Prints how long one `sample` takes over Gemma's 262144-token vocabulary (no assertion on
/// time), for flat random logits and for LM-like ones (a few clear favourites over a broad
/// tail). Run with `--ignored --nocapture`.
#[test]
#[ignore]
fn sampling_speed() {
    let mut rng = Rng::new(8);
    let flat = logits(&mut rng, 262_144, 0);
    let mut peaked: Vec<f32> = flat.iter().map(|x| x * 0.4).collect();
    for i in 0..20 {
        peaked[(i * 7919) % 262_144] = 12.0 + i as f32 * 0.3;
    }
    for (label, l) in [("flat", &flat), ("peaked", &peaked)] {
        for (name, cfg) in [
            ("greedy", SamplerConfig::greedy()),
            (
                "default (top-k 40)",
                SamplerConfig {
                    seed: Some(1),
                    ..Default::default()
                },
            ),
            (
                "top-p 0.9 only",
                SamplerConfig {
                    top_k: 0,
                    min_p: 0.0,
                    top_p: 0.9,
                    seed: Some(1),
                    ..Default::default()
                },
            ),
            ("unfiltered", SamplerConfig::unfiltered(1)),
        ] {
            let mut s = Sampler::new(cfg).unwrap();
            let mut buf = l.clone();
            let n = 30;
            let t = std::time::Instant::now();
            for _ in 0..n {
                buf.copy_from_slice(l);
                s.sample(&mut buf, &[1, 2, 3]);
            }
            let ms = t.elapsed().as_secs_f64() * 1e3 / n as f64;
            eprintln!(
                "{label} {name}: {ms:.3} ms/token, {} candidates",
                s.distribution().len()
            );
        }
    }
}
