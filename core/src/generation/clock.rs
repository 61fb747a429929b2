//! A clock that works everywhere Weft runs (`Instant::now` panics on
//! wasm32-unknown-unknown, so the browser build reads `performance.now()`).

/// Seconds since an arbitrary fixed point of this process; only differences mean anything.
pub fn now_secs() -> f64 {
    #[cfg(not(target_arch = "wasm32"))]
    {
        static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
        START
            .get_or_init(std::time::Instant::now)
            .elapsed()
            .as_secs_f64()
    }
    #[cfg(target_arch = "wasm32")]
    {
        use wasm_bindgen::JsCast;
        let g = js_sys::global();
        let ms = js_sys::Reflect::get(&g, &"performance".into())
            .ok()
            .filter(|p| !p.is_undefined())
            .and_then(|p| {
                let f = js_sys::Reflect::get(&p, &"now".into()).ok()?;
                let f: js_sys::Function = f.dyn_into().ok()?;
                f.call0(&p).ok()?.as_f64()
            })
            .unwrap_or_else(js_sys::Date::now);
        ms / 1000.0
    }
}
