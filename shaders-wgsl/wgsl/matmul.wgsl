// Fused dequantize + matrix product: y[t][row0 + r] = Σ_c x[t][c] · w[r][c].
//
// A workgroup of 64 invocations handles 64 / tpr weight rows (tpr = invocations per row, a
// power of two chosen by the host) and a tile of up to TOK tokens; within a tile the weight
// rows stay in cache across tokens; for decode (one token) this is the matrix-vector product.
// Weights stay quantized in GPU memory and are read in 32-element units (see quant.wgsl).
// Weight rows are bound in chunks (tensors larger than one binding are split by rows); `row0`
// places a chunk's rows in the output. Prefill on GPUs with quantized weights takes the tiled
// kernel of matmul_tiled.wgsl (appended to this file), with the same results.
//
// Quantized weights (QKIND 1-3) are dotted with quantized activations (actquant.wgsl: integer
// quants packed four to a word, and per 32 elements the block scale and Q8_1 sum) in the CPU
// backend's arithmetic,
// so both backends give the same bits (a quant flipped downstream moves logits by tenths):
//   1, 32-element blocks (Q4_0, Q4_1, Q5_0, Q8_0), the order of the CPU's AVX2 kernels:
//      8 lanes of 4 elements; per block d = dw·da and, for lane L, the integer dot of the
//      lane's 4 elements, fma-accumulated into acc[block parity][L]; then
//      v = acc[0] + acc[1], s_i = v_i + v_{i+4}, result (s0 + s2) + (s1 + s3), plus, for
//      Q4_1, (m0 + m1) where m[parity] fma-accumulates mw · (the Q8_1 sum).
//   2, K blocks with a minimum (Q4_K, Q5_K): per 256-element block, integer
//      sumi = Σ sc_j·(q·a over sub-block j) and summ = Σ m_j·(Σ a over sub-block j); the block
//      adds (da·d)·sumi − (da·dmin)·summ to a running sum, block after block.
//   3, Q6_K: as 2 with (q − 32) and the two scales of each unit's halves, no minimum.
// Float weights (QKIND 0: F32, F16) are dotted with the f32 activations in units (or with the
// quants times their scale when `act_q`).
// `keep` hides a product from the compiler so that it is not fused with the following
// addition (fusing changes the rounding); `fma_x` rounds once where the CPU fuses.

const WG: u32 = 64u;
const TOK: u32 = 8u;

struct Params {
    rows: u32,        // rows in this chunk
    cols: u32,        // elements per row (a multiple of 32)
    n_tok: u32,       // activation rows
    row_bytes: u32,   // bytes per weight row
    out_stride: u32,  // output row width (all rows of the weight)
    row0: u32,        // first row of this chunk within the weight
    groups_x: u32,    // workgroups along x (row groups are spread over x and y)
    tpr: u32,         // invocations per row: a power of two dividing WG (16 for QKIND 1)
    zero: u32,        // 0, unknown to the compiler (see `keep`)
    act_q: u32,       // 1: x holds packed quants (float weights converted at load from a quantized type)
    _pad1: u32,
    _pad2: u32,
}

// Binding 0, the weights `w`, is declared by the dequantizer file (quant.wgsl or quant_f16.wgsl).
// The activations: f32 values (as bits), or with `act_q` and for quantized weights the packed
// quants of actquant.wgsl (one word per 4 elements).
@group(0) @binding(1) var<storage, read> x: array<u32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
// Per 32-element unit of x (quantized activations): (scale, Q8_1 sum); a dummy otherwise.
@group(0) @binding(3) var<storage, read> xs: array<f32>;
@group(0) @binding(4) var<uniform> p: Params;

var<workgroup> red: array<f32, 64>;
var<workgroup> redm: array<f32, 64>;

fn keep(v: f32) -> f32 {
    return bitcast<f32>(bitcast<u32>(v) ^ p.zero);
}

// fma(a, b, c) rounded once, as the CPU's FMA instructions round it, from exact operations
// (WGSL's `fma` may be unfused: lavapipe lowers it to a product and a sum): a·b exactly as
// (hi, lo) by Dekker's product, c + hi exactly as (s, e), then s + (e + lo) — the same result
// but when e + lo rounds onto a tie (probability about 2^-23).
fn split12(a: f32) -> vec2<f32> {
    let t = keep(4097.0 * a);
    let hi = keep(t - keep(t - a));
    return vec2<f32>(hi, a - hi);
}

fn fma_x(a: f32, b: f32, c: f32) -> f32 {
    let pr = keep(a * b);
    let x = split12(a);
    let y = split12(b);
    let lo = ((keep(x.x * y.x) - pr) + keep(x.x * y.y) + keep(x.y * y.x)) + keep(x.y * y.y);
    let s = keep(c + pr);
    let bb = keep(s - c);
    let e = (c - (s - bb)) + (pr - bb);
    return s + (e + lo);
}

fn fma_x4(a: vec4<f32>, b: vec4<f32>, c: vec4<f32>) -> vec4<f32> {
    return vec4<f32>(fma_x(a.x, b.x, c.x), fma_x(a.y, b.y, c.y), fma_x(a.z, b.z, c.z), fma_x(a.w, b.w, c.w));
}

// Float weights: dot of unit `u` of the row at `row` with 32 activations starting at `xb`
// (quants times their block scale when the activations are quantized).
fn unit_dot(row: u32, u: u32, xb: u32) -> f32 {
    let sc = scales(row, u);
    let act_q = p.act_q != 0u;
    var sx = 1.0;
    if (act_q) {
        sx = xs[2u * (xb / 32u)];
    }
    var s = 0.0;
    for (var q = 0u; q < 8u; q++) {
        let i = xb + 4u * q;
        var xv = vec4<f32>(0.0);
        if (act_q) {
            xv = vec4<f32>(xq(i)) * sx;
        } else {
            xv = bitcast<vec4<f32>>(vec4<u32>(x[i], x[i + 1u], x[i + 2u], x[i + 3u]));
        }
        s += dot(quad(row, u, q, sc), xv);
    }
    return s;
}

// The four activation quants from element i (a multiple of 4): one packed word.
fn xq(i: u32) -> vec4<i32> {
    return unpack_i8(x[i / 4u]);
}

// Lane L's integer dot in unit u (activation unit starting at xb).
fn lane_dot(row: u32, u: u32, xb: u32, l: u32) -> f32 {
    return f32(dot(iquad(row, u, l), xq(xb + 4u * l)));
}

// QKIND 2/3: one unit's terms of its K block's integer sums (sumi, summ): weight quants `wq`
// with the unit's (scale, min) or half scales `ks`, against the 32 activation quants from ub.
fn kunit(wq: array<vec4<i32>, 8>, ks: vec2<i32>, ub: u32) -> vec2<i32> {
    var s0 = 0;
    var s1 = 0;
    var bs = 0;
    for (var q = 0u; q < 8u; q++) {
        let a = xq(ub + 4u * q);
        let v = dot(wq[q], a);
        if (q < 4u) {
            s0 += v;
        } else {
            s1 += v;
        }
        bs += a.x + a.y + a.z + a.w;
    }
    if (QKIND == 2u) {
        return vec2<i32>(ks.x * (s0 + s1), ks.y * bs);
    }
    return vec2<i32>(ks.x * s0 + ks.y * s1, 0);
}

// QKIND 2/3: a K block's value from its integer sums, activation scale da and weight (d, dmin).
fn kvalue(da: f32, dm: vec2<f32>, sumi: i32, summ: i32) -> f32 {
    let t1 = keep((da * dm.x) * i2f_rn(sumi));
    if (QKIND == 2u) {
        return t1 - keep((da * dm.y) * i2f_rn(summ));
    }
    return t1;
}

// QKIND 2/3: block `blk` of the row, activations of the block starting at xb.
fn kblock(row: u32, blk: u32, xb: u32) -> f32 {
    var sumi = 0;
    var summ = 0;
    var wq = array<vec4<i32>, 8>();
    for (var j = 0u; j < 8u; j++) {
        let u = 8u * blk + j;
        for (var q = 0u; q < 8u; q++) {
            wq[q] = iquad(row, u, q);
        }
        let c = kunit(wq, kscale(row, u), xb + 32u * j);
        sumi += c.x;
        summ += c.y;
    }
    return kvalue(xs[2u * (xb / 32u)], kdm(row, blk), sumi, summ);
}

// The fixed combine of the 16 lane accumulators (CPU: add the parities, then hsum_ps).
fn lanes_total(a0l: vec4<f32>, a0h: vec4<f32>, a1l: vec4<f32>, a1h: vec4<f32>, m0: f32, m1: f32) -> f32 {
    let s = (a0l + a1l) + (a0h + a1h);
    let r = (s.x + s.z) + (s.y + s.w);
    if (HAS_MIN) {
        return r + (m0 + m1);
    }
    return r;
}

// One row against one activation row (starting at xt), one invocation.
fn row_dot(row: u32, xt: u32) -> f32 {
    let units = p.cols / 32u;
    if (QKIND == 0u) {
        var acc = 0.0;
        for (var u = 0u; u < units; u++) {
            acc += unit_dot(row, u, xt + 32u * u);
        }
        return acc;
    }
    if (QKIND == 1u) {
        var a0l = vec4<f32>(0.0);
        var a0h = vec4<f32>(0.0);
        var a1l = vec4<f32>(0.0);
        var a1h = vec4<f32>(0.0);
        var m0 = 0.0;
        var m1 = 0.0;
        for (var u = 0u; u < units; u++) {
            let xb = xt + 32u * u;
            let ls = lscale(row, u);
            let xi = 2u * (xb / 32u);
            let d = vec4<f32>(ls.x * xs[xi]);
            let pl = vec4<f32>(lane_dot(row, u, xb, 0u), lane_dot(row, u, xb, 1u), lane_dot(row, u, xb, 2u), lane_dot(row, u, xb, 3u));
            let ph = vec4<f32>(lane_dot(row, u, xb, 4u), lane_dot(row, u, xb, 5u), lane_dot(row, u, xb, 6u), lane_dot(row, u, xb, 7u));
            if ((u & 1u) == 0u) {
                a0l = fma_x4(d, pl, a0l);
                a0h = fma_x4(d, ph, a0h);
                if (HAS_MIN) {
                    m0 = m0 + keep(ls.y * xs[xi + 1u]); // exact product (two f16s)
                }
            } else {
                a1l = fma_x4(d, pl, a1l);
                a1h = fma_x4(d, ph, a1h);
                if (HAS_MIN) {
                    m1 = m1 + keep(ls.y * xs[xi + 1u]);
                }
            }
        }
        return lanes_total(a0l, a0h, a1l, a1h, m0, m1);
    }
    var sum = 0.0;
    for (var blk = 0u; blk < units / 8u; blk++) {
        sum += kblock(row, blk, xt + 256u * blk);
    }
    return sum;
}

// Sums `v` over each row's segment of tpr invocations (float weights); the result is in
// red[segment start].
fn segment_sum(v: f32, lid: u32, lane: u32) -> f32 {
    red[lid] = v;
    workgroupBarrier();
    for (var s = p.tpr / 2u; s > 0u; s >>= 1u) {
        if (lane < s) {
            red[lid] += red[lid + s];
        }
        workgroupBarrier();
    }
    let total = red[lid - lane];
    workgroupBarrier();
    return total;
}

// Cooperative rows (GPUs). Float weights: units strided over the row's invocations, a tree
// sum. QKIND 1: tpr = 16, invocation k runs the accumulator of block parity k / 8 and lane
// k % 8, then the first combines them in the CPU's order. QKIND 2/3: invocations form
// consecutive blocks' values, which the first adds in block order.
fn coop_dot(row: u32, xt: u32, lid: u32, lane: u32, in_range: bool) -> f32 {
    let units = p.cols / 32u;
    if (QKIND == 0u) {
        var acc = 0.0;
        if (in_range) {
            for (var u = lane; u < units; u += p.tpr) {
                acc += unit_dot(row, u, xt + 32u * u);
            }
        }
        return segment_sum(acc, lid, lane);
    }
    if (QKIND == 1u) {
        let l = lane & 7u;
        var acc = 0.0;
        var m = 0.0;
        if (in_range) {
            for (var u = lane >> 3u; u < units; u += 2u) {
                let xb = xt + 32u * u;
                let ls = lscale(row, u);
                let xi = 2u * (xb / 32u);
                acc = fma_x(ls.x * xs[xi], lane_dot(row, u, xb, l), acc);
                if (HAS_MIN) {
                    m = m + keep(ls.y * xs[xi + 1u]);
                }
            }
        }
        red[lid] = acc;
        redm[lid] = m;
        workgroupBarrier();
        var total = 0.0;
        if (lane == 0u) {
            let b = lid;
            let a0l = vec4<f32>(red[b], red[b + 1u], red[b + 2u], red[b + 3u]);
            let a0h = vec4<f32>(red[b + 4u], red[b + 5u], red[b + 6u], red[b + 7u]);
            let a1l = vec4<f32>(red[b + 8u], red[b + 9u], red[b + 10u], red[b + 11u]);
            let a1h = vec4<f32>(red[b + 12u], red[b + 13u], red[b + 14u], red[b + 15u]);
            total = lanes_total(a0l, a0h, a1l, a1h, redm[b], redm[b + 8u]);
        }
        workgroupBarrier();
        return total;
    }
    let nblk = units / 8u;
    var sum = 0.0;
    for (var c = 0u; c < nblk; c += p.tpr) {
        var v = 0.0;
        if (in_range && c + lane < nblk) {
            v = kblock(row, c + lane, xt + 256u * (c + lane));
        }
        red[lid] = v;
        workgroupBarrier();
        if (lane == 0u) {
            for (var i = 0u; i < min(p.tpr, nblk - c); i++) {
                sum += red[lid + i];
            }
        }
        workgroupBarrier();
    }
    return sum;
}

// Tiles of up to TOK tokens.
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let lane = lid % p.tpr;
    let r = (wid.x + wid.y * p.groups_x) * (WG / p.tpr) + lid / p.tpr;
    let t0 = wid.z * TOK;
    let in_range = r < p.rows;
    let nt = min(TOK, p.n_tok - t0);
    let row = r * p.row_bytes;
    for (var t = 0u; t < nt; t++) {
        let total = coop_dot(row, (t0 + t) * p.cols, lid, lane, in_range);
        if (in_range && lane == 0u) {
            y[(t0 + t) * p.out_stride + p.row0 + r] = total;
        }
    }
}

// The weight row and token tile of an invocation of `per_row` / `per_row_tile` (the row is
// past the chunk's rows in the last workgroup).
struct RowTile {
    r: u32,
    t0: u32,
    nt: u32,
}

fn row_tile(gid: vec3<u32>, wid: vec3<u32>) -> RowTile {
    let t0 = wid.z * TOK;
    return RowTile(gid.x + wid.y * p.groups_x * WG, t0, min(TOK, p.n_tok - t0));
}

// The row against each token of the tile, one after the other.
fn row_each_token(rt: RowTile) {
    for (var t = 0u; t < rt.nt; t++) {
        y[(rt.t0 + t) * p.out_stride + p.row0 + rt.r] = row_dot(rt.r * p.row_bytes, (rt.t0 + t) * p.cols);
    }
}

// One invocation per weight row and no workgroup memory or barriers: the fast form on CPU
// adapters (lavapipe, SwiftShader), where barriers are costly and there are no memory
// transactions to coalesce. Same results as `main`.
@compute @workgroup_size(64)
fn per_row(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
    let rt = row_tile(gid, wid);
    if (rt.r < p.rows) {
        row_each_token(rt);
    }
}

// Prefill on CPU adapters: as `per_row`, but each weight unit is decoded once for the whole
// token tile (its integer quants held in registers) and dotted with every token's activations.
// Every (row, token) keeps its own accumulators in the same order, so the results are those
// of `per_row` bit for bit; the weight decoding, the costly part on a CPU, is done 1/TOK as
// often. Float weights (QKIND 0) take `per_row`'s loop.
@compute @workgroup_size(64)
fn per_row_tile(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
    let rt = row_tile(gid, wid);
    if (rt.r >= p.rows) {
        return;
    }
    if (QKIND == 0u) {
        row_each_token(rt);
        return;
    }
    let t0 = rt.t0;
    let nt = rt.nt;
    let row = rt.r * p.row_bytes;
    let units = p.cols / 32u;
    let out0 = t0 * p.out_stride + p.row0 + rt.r;
    var wq = array<vec4<i32>, 8>();
    if (QKIND == 1u) {
        // Per token: lane accumulators (parity 0 low/high, parity 1 low/high) and minimums.
        var acc = array<vec4<f32>, 32>();
        var mins = array<vec2<f32>, 8>();
        for (var u = 0u; u < units; u++) {
            let ls = lscale(row, u);
            for (var q = 0u; q < 8u; q++) {
                wq[q] = iquad(row, u, q);
            }
            let par = 2u * (u & 1u);
            for (var t = 0u; t < nt; t++) {
                let xb = (t0 + t) * p.cols + 32u * u;
                let xi = 2u * (xb / 32u);
                let d = vec4<f32>(ls.x * xs[xi]);
                let pl = vec4<f32>(f32(dot(wq[0], xq(xb))), f32(dot(wq[1], xq(xb + 4u))), f32(dot(wq[2], xq(xb + 8u))), f32(dot(wq[3], xq(xb + 12u))));
                let ph = vec4<f32>(f32(dot(wq[4], xq(xb + 16u))), f32(dot(wq[5], xq(xb + 20u))), f32(dot(wq[6], xq(xb + 24u))), f32(dot(wq[7], xq(xb + 28u))));
                acc[4u * t + par] = fma_x4(d, pl, acc[4u * t + par]);
                acc[4u * t + par + 1u] = fma_x4(d, ph, acc[4u * t + par + 1u]);
                if (HAS_MIN) {
                    if ((u & 1u) == 0u) {
                        mins[t].x = mins[t].x + keep(ls.y * xs[xi + 1u]);
                    } else {
                        mins[t].y = mins[t].y + keep(ls.y * xs[xi + 1u]);
                    }
                }
            }
        }
        for (var t = 0u; t < nt; t++) {
            y[out0 + t * p.out_stride] = lanes_total(acc[4u * t], acc[4u * t + 1u], acc[4u * t + 2u], acc[4u * t + 3u], mins[t].x, mins[t].y);
        }
        return;
    }
    var sums = array<f32, 8>();
    for (var blk = 0u; blk < units / 8u; blk++) {
        let dm = kdm(row, blk);
        // Zeroed explicitly for each block: Chromium's Tint emits a `var` without initializer
        // as one zero-initialised variable per invocation, so a loop-local one kept the previous
        // block's sums there (wrong K-quant prefill in the browser); naga re-zeroes it. Every
        // function-scope `var` in these kernels has an initializer (tests/initializers.rs).
        var sumi = array<i32, 8>();
        var summ = array<i32, 8>();
        for (var j = 0u; j < 8u; j++) {
            let u = 8u * blk + j;
            let ks = kscale(row, u);
            for (var q = 0u; q < 8u; q++) {
                wq[q] = iquad(row, u, q);
            }
            for (var t = 0u; t < nt; t++) {
                let c = kunit(wq, ks, (t0 + t) * p.cols + 32u * u);
                sumi[t] += c.x;
                summ[t] += c.y;
            }
        }
        for (var t = 0u; t < nt; t++) {
            let da = xs[2u * (((t0 + t) * p.cols + 256u * blk) / 32u)];
            sums[t] += kvalue(da, dm, sumi[t], summ[t]);
        }
    }
    for (var t = 0u; t < nt; t++) {
        y[out0 + t * p.out_stride] = sums[t];
    }
}
