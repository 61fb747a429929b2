//! The chat page's routes on the real `weft serve`: `/` and `/chat/...` from the files embedded
//! in the binary, with their content types, caching (`ETag` revalidation for the page's own
//! files, a year for the versioned vendored ones), a strict CSP; unknown files are 404; the
//! upload and session-history routes are in the OpenAPI document.

use weft_core::test_support::model_path;
use weft_tests::Server;

#[test]
fn chat_page_routes() {
    let Some(model) = model_path("smollm2") else {
        return;
    };
    let server = Server::start(&model, &["--ctx", "256"]);

    let page = server.request("GET", "/", None);
    assert_eq!(page.status, 200);
    assert_eq!(
        page.header("content-type"),
        Some("text/html; charset=utf-8")
    );
    assert_eq!(page.header("cache-control"), Some("no-cache"));
    let csp = page.header("content-security-policy").unwrap_or_default();
    assert!(csp.contains("script-src 'self'"), "{csp}");
    assert!(page.body.contains("/chat/chat.js") && page.body.contains("href=\"/play/\""));
    // The page as embedded is the page in the source tree.
    let on_disk = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../web/chat/index.html"),
    )
    .unwrap();
    assert_eq!(page.body, on_disk);

    let tag = page.header("etag").expect("an ETag").to_string();
    let again = server
        .try_request("GET", "/", None, &[("If-None-Match", &tag)])
        .unwrap();
    assert_eq!(again.status, 304);
    assert!(again.body.is_empty());

    for (path, ctype, cache) in [
        (
            "/chat/chat.js",
            "text/javascript; charset=utf-8",
            "no-cache",
        ),
        ("/chat/chat.css", "text/css; charset=utf-8", "no-cache"),
        (
            "/chat/vendor/marked-18.2.1.esm.js",
            "text/javascript; charset=utf-8",
            "public, max-age=31536000, immutable",
        ),
        (
            "/chat/vendor/purify-3.5.0.es.mjs",
            "text/javascript; charset=utf-8",
            "public, max-age=31536000, immutable",
        ),
    ] {
        let r = server.request("GET", path, None);
        assert_eq!(r.status, 200, "{path}");
        assert_eq!(r.header("content-type"), Some(ctype), "{path}");
        assert_eq!(r.header("cache-control"), Some(cache), "{path}");
        assert_eq!(
            r.header("x-content-type-options"),
            Some("nosniff"),
            "{path}"
        );
    }
    for missing in ["/chat/nope.js", "/chat/../Cargo.toml", "/chat/vendor/"] {
        assert_eq!(
            server.request("GET", missing, None).status,
            404,
            "{missing}"
        );
    }

    let doc = server.request("GET", "/openapi.json", None).json();
    for p in ["/api/upload", "/uploads/{name}", "/api/sessions/{id}"] {
        assert!(
            doc["paths"].get(p).is_some(),
            "{p} missing from the OpenAPI document"
        );
    }
    assert!(doc["paths"]["/api/sessions/{id}"].get("get").is_some());
}
