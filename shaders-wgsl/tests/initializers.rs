//! Every function-scope `var` in every module the backend builds has an initializer.
//!
//! WGSL zero-initialises a `var` without one each time its declaration runs, so one declared in
//! a loop body starts at zero in every iteration. Chromium's Tint (Chromium 156, WebGPU on
//! SwiftShader) emits such a variable as one SPIR-V variable zeroed at function entry and no
//! store where it is declared, so it kept the previous iteration's value: the K-quant prefill
//! product (`per_row_tile`, whose per-block integer sums were declared that way) gave wrong
//! tokens in the browser while naga, natively, re-zeroes it. With an initializer both compilers
//! store it at the declaration.

#[test]
fn every_function_scope_var_has_an_initializer() {
    // Each declaration once, with the first module that has it (modules share files).
    let mut missing: Vec<String> = Vec::new();
    for (name, src) in weft_shaders::all_modules() {
        for (i, line) in src.lines().enumerate() {
            if let Some(decl) = uninitialised_local(line) {
                if !missing.iter().any(|m| m.ends_with(&format!(": {decl}"))) {
                    missing.push(format!("{name} line {}: {decl}", i + 1));
                }
            }
        }
    }
    assert!(
        missing.is_empty(),
        "function-scope `var`s without an initializer (write `var x = T();`):\n{}",
        missing.join("\n")
    );
}

/// The declaration on `line` when it is a function-scope `var` without an initializer.
/// Module-scope variables (`var<workgroup>`, `var<storage, ..>`, `var<private>`) carry an
/// address space; function-scope ones are `var name: T;` or `var name = value;` (the `for`
/// headers' `var i = 0u` have initializers).
fn uninitialised_local(line: &str) -> Option<&str> {
    let code = line.split("//").next().unwrap_or("");
    let mut found = None;
    for (at, _) in code.match_indices("var") {
        let before = code[..at].chars().next_back();
        let rest = &code[at + 3..];
        let starts_word = before.is_none_or(|c| !(c.is_alphanumeric() || c == '_'));
        if !starts_word || !rest.starts_with(char::is_whitespace) {
            continue; // part of a longer name, or `var<...>` (module scope)
        }
        let decl = rest.split(';').next().unwrap_or(rest);
        if !decl.contains('=') {
            found = Some(code[at..].trim());
        }
    }
    found
}

#[test]
fn the_check_sees_declarations_without_initializers() {
    assert!(uninitialised_local("        var sumi: array<i32, 8>;").is_some());
    assert!(uninitialised_local("    var r: f32; // note").is_some());
    assert!(uninitialised_local("        var sumi = array<i32, 8>();").is_none());
    assert!(uninitialised_local("    for (var q = 0u; q < 8u; q++) {").is_none());
    assert!(uninitialised_local("var<workgroup> red: array<f32, 64>;").is_none());
    assert!(
        uninitialised_local("@group(0) @binding(0) var<storage, read> w: array<u32>;").is_none()
    );
    assert!(uninitialised_local("    let variance = 0.0;").is_none());
    assert!(uninitialised_local("    // var x: f32;").is_none());
}
