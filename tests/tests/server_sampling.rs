//! Operator sampling values and `--sampling-precedence`: with `--temperature 0` set by the
//! operator, requests asking for hot sampling still get the greedy answer; with
//! `--sampling-precedence request` the request's temperature is used (a seeded hot sample
//! then reproduces itself, and the greedy request stays greedy).

use serde_json::json;
use weft_core::test_support::model_path;
use weft_tests::Server;

fn answer(server: &Server, extra: serde_json::Value) -> String {
    let mut b = json!({"model": "smol", "max_tokens": 6,
                       "messages": [{"role": "user", "content": "Tell me a fun fact."}]});
    for (k, v) in extra.as_object().unwrap() {
        b[k] = v.clone();
    }
    let r = server.request("POST", "/v1/chat/completions", Some(&b.to_string()));
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()["choices"][0]["message"]["content"]
        .as_str()
        .unwrap()
        .to_string()
}

#[test]
fn operator_values_win_unless_told_otherwise() {
    let Some(model) = model_path("smollm2") else {
        return;
    };
    let server = Server::start(
        &model,
        &["--ctx", "256", "--alias", "smol", "--temperature", "0"],
    );
    let greedy = answer(&server, json!({"temperature": 0}));
    for seed in [1, 2, 3] {
        let hot = answer(
            &server,
            json!({"temperature": 2.0, "top_k": 0, "top_p": 1.0, "seed": seed}),
        );
        assert_eq!(
            hot, greedy,
            "the operator's temperature 0 must win (seed {seed})"
        );
    }
    drop(server);

    let server = Server::start(
        &model,
        &[
            "--ctx",
            "256",
            "--alias",
            "smol",
            "--temperature",
            "0",
            "--sampling-precedence",
            "request",
        ],
    );
    assert_eq!(answer(&server, json!({"temperature": 0})), greedy);
    let hot: Vec<String> = [1, 2, 3]
        .iter()
        .map(|&s| {
            answer(
                &server,
                json!({"temperature": 2.0, "top_k": 0, "top_p": 1.0, "min_p": 0.0, "seed": s}),
            )
        })
        .collect();
    // Three independent samples from the full distribution at temperature 2 are not all
    // the greedy text (each would have to pick the argmax six times in a row).
    assert!(
        hot.iter().any(|h| *h != greedy),
        "request temperature ignored: {hot:?}"
    );
}
