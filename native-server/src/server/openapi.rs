//! `GET /openapi.json`: an OpenAPI 3.1 description of every route this server answers.

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Map, Value};

use super::state::Shared;

/// (method, path, summary, request body required, response content type)
const ROUTES: &[(&str, &str, &str, bool, &str)] = &[
    ("get", "/v1/models", "List models (OpenAI)", false, "application/json"),
    ("get", "/v1/models/{id}", "One model (OpenAI)", false, "application/json"),
    ("post", "/v1/chat/completions", "Chat completion; SSE when stream is true (OpenAI)", true, "application/json"),
    ("post", "/v1/completions", "Text completion; SSE when stream is true (OpenAI)", true, "application/json"),
    ("post", "/v1/tokenize", "Text to token ids ({content|prompt, add_special})", true, "application/json"),
    ("post", "/v1/detokenize", "Token ids to text ({tokens})", true, "application/json"),
    ("get", "/v1/metrics", "Scheduler counters (JSON)", false, "application/json"),
    ("post", "/api/generate", "Generate; NDJSON unless stream is false (Ollama)", true, "application/x-ndjson"),
    ("post", "/api/chat", "Ollama chat, or the chat-UI SSE protocol when the body has no model and has sessionId/maxTokens/newChat", true, "application/x-ndjson"),
    ("post", "/api/chat/ollama", "Ollama chat (alias)", true, "application/x-ndjson"),
    ("get", "/api/tags", "Local models (Ollama)", false, "application/json"),
    ("post", "/api/show", "Model details (Ollama)", true, "application/json"),
    ("get", "/api/ps", "Loaded models (Ollama)", false, "application/json"),
    ("post", "/api/create", "New model name from an existing model with system/template/parameters (Ollama)", true, "application/json"),
    ("post", "/api/copy", "Copy a model name (Ollama)", true, "application/json"),
    ("delete", "/api/delete", "Delete a model name; a busy model goes when idle (Ollama)", true, "application/json"),
    ("get", "/api/version", "Server version (Ollama)", false, "application/json"),
    ("post", "/api/models/load", "Load a model ({model}) (chat UI)", true, "application/json"),
    ("post", "/api/v1/models/load", "Load a model ({model, keep_alive})", true, "application/json"),
    ("post", "/api/v1/models/unload", "Unload a model now or when idle ({model})", true, "application/json"),
    ("get", "/api/v1/models/library", "Every known model: file, origin, alias, broken, loaded", false, "application/json"),
    ("post", "/api/v1/models/alias", "Add an alias ({alias, model})", true, "application/json"),
    ("get", "/api/v1/models/{id}/modelfile", "A model name's Modelfile, system, template, parameters", false, "application/json"),
    ("put", "/api/v1/models/{id}/modelfile", "Replace a model name's system, template, parameters", true, "application/json"),
    ("post", "/api/ui/chat", "Chat-UI SSE stream: token/thinking frames, terminal done frame", true, "text/event-stream"),
    ("post", "/api/sessions", "Create a chat-UI session", false, "application/json"),
    ("delete", "/api/sessions/{id}", "Delete a chat-UI session", false, "application/json"),
    ("get", "/api/models", "Default model, every model, backend, defaults (chat UI)", false, "application/json"),
    ("get", "/api/queue/status", "Waiting and running requests", false, "application/json"),
    ("get", "/health", "Liveness and component status", false, "application/json"),
    ("get", "/ready", "Readiness: 200 once the default model is loaded, 503 before", false, "application/json"),
    ("get", "/metrics", "Prometheus metrics", false, "text/plain"),
    ("get", "/openapi.json", "This document", false, "application/json"),
];

pub async fn document(State(st): State<Shared>) -> Response {
    let mut paths = Map::new();
    for &(method, path, summary, body, ctype) in ROUTES {
        let mut op = json!({
            "summary": summary,
            "responses": {
                "200": {"description": "OK", "content": {ctype: {}}},
                "400": {"description": "Invalid request", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}},
            }
        });
        if body {
            op["requestBody"] = json!({"required": true, "content": {"application/json": {"schema": {"type": "object"}}}});
        }
        let params: Vec<Value> = path
            .split('/')
            .filter_map(|seg| seg.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
            .map(|name| json!({"name": name, "in": "path", "required": true, "schema": {"type": "string"}}))
            .collect();
        if !params.is_empty() {
            op["parameters"] = Value::Array(params);
        }
        let entry = paths.entry(path.to_string()).or_insert_with(|| json!({}));
        entry[method] = op;
    }
    Json(json!({
        "openapi": "3.1.0",
        "info": {"title": "Weft server", "version": env!("CARGO_PKG_VERSION"),
                 "description": format!("Serving {} on the {} backend.", st.registry.with_catalog(|c| c.names().join(", ")), st.cfg.backend)},
        "paths": paths,
        "components": {"schemas": {"Error": {"oneOf": [
            {"type": "object", "description": "/v1 routes", "properties": {"error": {"type": "object", "properties": {
                "message": {"type": "string"}, "type": {"type": "string"}, "code": {"type": ["string", "null"]}}}}},
            {"type": "object", "description": "/api routes", "properties": {"error": {"type": "string"}}}
        ]}}}
    }))
    .into_response()
}
