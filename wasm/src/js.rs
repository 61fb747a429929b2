//! Small bridges to the JavaScript host: clock, yielding to the event loop, abort signals,
//! errors.

use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

/// Milliseconds from `performance.now()` (falls back to `Date.now()`).
pub fn now_ms() -> f64 {
    let g = js_sys::global();
    js_sys::Reflect::get(&g, &"performance".into())
        .ok()
        .filter(|p| !p.is_undefined())
        .and_then(|p| {
            let f = js_sys::Reflect::get(&p, &"now".into()).ok()?;
            let f: js_sys::Function = f.dyn_into().ok()?;
            f.call0(&p).ok()?.as_f64()
        })
        .unwrap_or_else(js_sys::Date::now)
}

/// Seconds since the Unix epoch (for chat templates that print today's date).
pub fn unix_secs() -> i64 {
    (js_sys::Date::now() / 1000.0) as i64
}

/// Lets the event loop run (messages such as a stop request), via `setTimeout(0)`.
pub async fn yield_now() {
    let p = js_sys::Promise::new(&mut |resolve, _| {
        let g = js_sys::global();
        if let Ok(f) = js_sys::Reflect::get(&g, &"setTimeout".into()) {
            if let Ok(f) = f.dyn_into::<js_sys::Function>() {
                let _ = f.call2(&g, &resolve, &JsValue::from(0));
                return;
            }
        }
        let _ = resolve.call0(&JsValue::NULL);
    });
    let _ = wasm_bindgen_futures::JsFuture::from(p).await;
}

/// Whether an `AbortSignal` (or anything with an `aborted` property) has fired.
pub fn aborted(signal: &JsValue) -> bool {
    if signal.is_undefined() || signal.is_null() {
        return false;
    }
    js_sys::Reflect::get(signal, &"aborted".into())
        .map(|v| v.is_truthy())
        .unwrap_or(false)
}

/// A JS `Error` with `message`.
pub fn error(message: impl std::fmt::Display) -> JsValue {
    js_sys::Error::new(&message.to_string()).into()
}

/// Parses a JS value given as JSON text or a plain object (via `JSON.stringify`).
pub fn from_js<T: serde::de::DeserializeOwned + Default>(
    v: &JsValue,
    what: &str,
) -> Result<T, JsValue> {
    if v.is_undefined() || v.is_null() {
        return Ok(T::default());
    }
    let text = match v.as_string() {
        Some(s) => s,
        None => js_sys::JSON::stringify(v)
            .map_err(|_| error(format!("{what}: not serialisable to JSON")))?
            .as_string()
            .unwrap_or_default(),
    };
    serde_json::from_str(&text).map_err(|e| error(format!("{what}: {e}")))
}

/// Turns a serde value into a plain JS object (through JSON).
pub fn to_js(v: &serde_json::Value) -> Result<JsValue, JsValue> {
    js_sys::JSON::parse(&v.to_string())
}
