// Embedding gather: out[t] = scale · dequantize(table[tokens[t]]), from a quantized table.
// One invocation per 32-element unit of one token's row. A table larger than one binding is
// split by rows into chunks; each chunk's dispatch writes only the tokens whose ids fall in
// its rows [row0, row0 + rows).

struct Params {
    rows: u32,
    cols: u32,
    n_tok: u32,
    row_bytes: u32,
    row0: u32,
    scale: f32,
    _pad0: u32,
    _pad1: u32,
}

// Binding 0, the weights `w`, is declared by the dequantizer file (quant.wgsl or quant_f16.wgsl).
@group(0) @binding(1) var<storage, read> tokens: array<u32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let u = gid.x;
    let t = gid.y;
    if (u >= p.cols / 32u || t >= p.n_tok) {
        return;
    }
    let id = tokens[t];
    if (id < p.row0 || id >= p.row0 + p.rows) {
        return;
    }
    let row = (id - p.row0) * p.row_bytes;
    let sc = scales(row, u);
    let o = t * p.cols + 32u * u;
    let m = min_of(sc);
    for (var q = 0u; q < 8u; q++) {
        let v = quad(row, u, q, sc) + m;
        y[o + 4u * q] = v.x * p.scale;
        y[o + 4u * q + 1u] = v.y * p.scale;
        y[o + 4u * q + 2u] = v.z * p.scale;
        y[o + 4u * q + 3u] = v.w * p.scale;
    }
}
