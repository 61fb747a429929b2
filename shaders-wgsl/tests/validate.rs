//! Every WGSL module the wgpu backend can build parses and validates with naga (no GPU needed).

use naga::valid::{Capabilities, ValidationFlags, Validator};

#[test]
fn every_module_parses_and_validates() {
    let modules = weft_shaders::all_modules();
    // 9 weight types × (matmul, matmul_tiled) and the activation quantizer, each with the packed
    // built-ins and in core WGSL; 9 × embed; F16 again on native f16 bindings (matmul, embed);
    // 8 other kernel families; 3 with reductions plus attention's native f16 cache, each
    // without and with subgroups.
    assert_eq!(
        modules.len(),
        2 * (2 * weft_shaders::QUANT_TYPES.len() + 1)
            + weft_shaders::QUANT_TYPES.len()
            + 2
            + 8
            + 2 * 4
    );
    let mut failures = Vec::new();
    for (name, src) in &modules {
        let module = match naga::front::wgsl::parse_str(src) {
            Ok(m) => m,
            Err(e) => {
                failures.push(format!("{name}: parse: {}", e.emit_to_string(src)));
                continue;
            }
        };
        // Only core WGSL, so the modules run on every adapter. pack2x16float/unpack2x16float
        // are core WebGPU; naga lists them as a capability only because a few GL ES drivers
        // lack them (wgpu enables it wherever WebGPU-conformant).
        // The packed_4x8_integer_dot_product built-ins only through PACKED_I8, which the backend
        // appends only where the implementation has the language extension.
        let builtins = ["pack4xI8", "unpack4xI8", "dot4I8Packed"];
        if !src.contains(weft_shaders::PACKED_I8) {
            for b in builtins {
                assert!(!src.contains(b), "{name}: uses {b} outside packed_i8.wgsl");
            }
        }
        // Subgroup variants ("+sg") are built only where the adapter has subgroups.
        assert_eq!(
            name.contains("+f16"),
            src.starts_with(weft_shaders::F16_DIRECTIVE),
            "{name}: `enable f16;` exactly in the f16 variants"
        );
        let mut caps = Capabilities::SHADER_FLOAT16_IN_FLOAT32;
        if name.ends_with("+sg") {
            caps |= Capabilities::SUBGROUP;
        }
        // Native f16 variants ("+f16") are built only where the adapter has shader-f16.
        if name.contains("+f16") {
            caps |= Capabilities::SHADER_FLOAT16;
        }
        let mut v = Validator::new(ValidationFlags::all(), caps);
        if let Err(e) = v.validate(&module) {
            failures.push(format!("{name}: validate: {}", e.emit_to_string(src)));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_wgsl_file_is_used() {
    // A .wgsl file added to wgsl/ must be wired into all_modules (and so validated).
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("wgsl");
    let all: String = weft_shaders::all_modules()
        .into_iter()
        .map(|(_, s)| s)
        .collect();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            all.contains(&text),
            "{} is not part of any validated module",
            path.display()
        );
    }
}

#[test]
fn every_entry_point_fits_webgpu_default_limits() {
    // WebGPU's defaults (any adapter has at least these): 256 invocations per workgroup and
    // 16384 bytes of workgroup storage, counted as the variables an entry point uses, each
    // rounded up to 16 bytes.
    for (name, src) in weft_shaders::all_modules() {
        let module = naga::front::wgsl::parse_str(&src).unwrap();
        let caps = Capabilities::SHADER_FLOAT16_IN_FLOAT32
            | Capabilities::SUBGROUP
            | Capabilities::SHADER_FLOAT16;
        let info = Validator::new(ValidationFlags::all(), caps)
            .validate(&module)
            .unwrap();
        for (i, ep) in module.entry_points.iter().enumerate() {
            let invocations: u32 = ep.workgroup_size.iter().product();
            assert!(invocations <= 256, "{name}/{}: {invocations}", ep.name);
            let uses = info.get_entry_point(i);
            let bytes: u32 = module
                .global_variables
                .iter()
                .filter(|(h, g)| g.space == naga::AddressSpace::WorkGroup && !uses[*h].is_empty())
                .map(|(_, g)| module.types[g.ty].inner.size(module.to_ctx()).div_ceil(16) * 16)
                .sum();
            assert!(bytes <= 16384, "{name}/{}: {bytes} bytes", ep.name);
        }
    }
}
