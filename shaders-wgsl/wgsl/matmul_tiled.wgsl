// Prefill product on GPUs (several tokens, quantized weights QKIND 1-3): a tile of RT weight
// rows × TT tokens per workgroup, the weights decoded once per tile into workgroup memory.
// Appended to matmul.wgsl (its Params, bindings, `keep`, `fma_x4`, `lanes_total`).
//
// `main` re-reads and re-decodes every weight unit once per token; here a workgroup walks K
// in steps of KU 32-element units: its 256 invocations decode the tile's weight quants (one
// row-unit each) into workgroup memory as packed i8x4 words with the row-unit's scales, and
// copy the tile's activation quants (x holds them packed, as actquant.wgsl writes them) with
// their per-unit scale and Q8_1 sum; after a barrier each invocation updates the outputs of one row × TPI tokens from
// workgroup memory. Every output keeps its own accumulators in `row_dot`'s order (the lane
// accumulators by block parity for QKIND 1; per 256-block integer sums, then the block's
// float terms in block order for QKIND 2/3), so the results are `per_row`'s — and the CPU
// backend's — bit for bit. Integer dots are exact in any order (`dot_i8`, packed_i8.wgsl).
//
// Tile shape: 64 rows × 16 tokens, each invocation one row × 4 tokens (one row's weight words
// serve four tokens; the 64 invocations of a token group read the same activation words, a
// broadcast);
// a K step of 4 units (128 elements: two block parities, half a K block). Workgroup memory
// 13568 bytes (the arrays below), under WebGPU's default 16384; 256 invocations, WebGPU's
// default maximum. Why not 32 × 32: prompts of tens of tokens and batches of decode rows
// would leave most of a 32-token tile idle, and 64 rows read each activation unit half as
// often (1 byte an activation element against ~0.6 for the weights).
// Float weights (QKIND 0) keep `main`.

const RT: u32 = 64u;  // weight rows per tile
const TT: u32 = 16u;  // tokens per tile
const KU: u32 = 4u;   // 32-element units per K step
const TPI: u32 = 4u;  // tokens per invocation (TT / TPI · RT = 256 invocations)

// Weight quants, [unit][word][row] (consecutive rows in consecutive words: one row per
// invocation reads without bank conflicts): RT·KU·8 words, 8192 bytes.
var<workgroup> tw: array<u32, 2048>;
// Per [unit][row]: QKIND 1 (d, m) as f32 bits; QKIND 2/3 the integer (scale, min) or the two
// half scales (2048 bytes).
var<workgroup> tws: array<vec2<u32>, 256>;
// Per row: the K block's (d, dmin) (a K step lies within one 256-block) (512 bytes).
var<workgroup> tdm: array<vec2<f32>, 64>;
// Activation quants, [token][unit][word] (2048 bytes), per [token][unit] the scale and
// Q8_1 sum (512 bytes), and for QKIND 2 the sum of the unit's quants (256 bytes).
var<workgroup> tx: array<u32, 512>;
var<workgroup> txs: array<vec2<f32>, 64>;
var<workgroup> txb: array<i32, 64>;

// Loads K step k0 (units k0 .. k0 + nu) of the tile into workgroup memory.
fn stage(lid: u32, row0: u32, t0: u32, nt: u32, k0: u32, nu: u32) {
    // Weights: invocation → (row lid / KU, unit lid % KU), neighbours reading neighbouring
    // bytes of a row.
    let r = lid / KU;
    let u = lid % KU;
    if (row0 + r < p.rows && u < nu) {
        let row = (row0 + r) * p.row_bytes;
        let ug = k0 + u;
        for (var q = 0u; q < 8u; q++) {
            tw[(u * 8u + q) * RT + r] = pack_i8(iquad(row, ug, q));
        }
        if (QKIND == 1u) {
            tws[u * RT + r] = bitcast<vec2<u32>>(lscale(row, ug));
        } else {
            tws[u * RT + r] = bitcast<vec2<u32>>(kscale(row, ug));
            if (u == 0u) {
                tdm[r] = kdm(row, k0 / 8u);
            }
        }
    }
    // Activations: TT·KU·8 words, two per invocation, neighbours reading neighbouring words.
    for (var j = lid; j < TT * KU * 8u; j += RT * TT / TPI) {
        let t = j / (KU * 8u);
        let ju = (j / 8u) % KU;
        var v = 0u;
        if (t < nt && ju < nu) {
            v = x[((t0 + t) * p.cols + 32u * (k0 + ju)) / 4u + j % 8u];
        }
        tx[j] = v;
    }
    if (lid < TT * KU) {
        let t = lid / KU;
        let ju = lid % KU;
        if (t < nt && ju < nu) {
            let xi = 2u * (((t0 + t) * p.cols) / 32u + k0 + ju);
            txs[lid] = vec2<f32>(xs[xi], xs[xi + 1u]);
        }
    }
}

// QKIND 2: the sum of each staged activation unit's quants (after `stage`'s barrier).
fn stage_sums(lid: u32) {
    if (lid < TT * KU) {
        var s = 0;
        for (var q = 0u; q < 8u; q++) {
            s += dot_i8(tx[lid * 8u + q], 0x01010101u);
        }
        txb[lid] = s;
    }
}

// The tile row's eight packed quant words of staged unit u.
fn tile_words(u: u32, r: u32) -> array<u32, 8> {
    var wv = array<u32, 8>();
    for (var q = 0u; q < 8u; q++) {
        wv[q] = tw[(u * 8u + q) * RT + r];
    }
    return wv;
}

// Lanes 0-3 (h = 0) or 4-7 (h = 1) of one unit: the integer dots of the row's words with
// the activation unit at tx[xw], as floats (exact: |dot| < 2^24).
fn lane_dots(wv: array<u32, 8>, xw: u32, h: u32) -> vec4<f32> {
    let b = 4u * h;
    return vec4<f32>(
        f32(dot_i8(wv[b], tx[xw + b])),
        f32(dot_i8(wv[b + 1u], tx[xw + b + 1u])),
        f32(dot_i8(wv[b + 2u], tx[xw + b + 2u])),
        f32(dot_i8(wv[b + 3u], tx[xw + b + 3u])),
    );
}

// QKIND 1: staged unit u into the accumulators of its block parity for the invocation's nj
// tokens from tb: acc[2j], acc[2j + 1] the lanes 0-3 and 4-7 of token j, m[j] its minimum.
// Called with the parity's own arrays, so that every index is a constant once unrolled.
fn unit_into(u: u32, r: u32, tb: u32, nj: u32, acc: ptr<function, array<vec4<f32>, 8>>, m: ptr<function, vec4<f32>>) {
    let wv = tile_words(u, r);
    let ls = bitcast<vec2<f32>>(tws[u * RT + r]);
    for (var j = 0u; j < TPI; j++) {
        if (j < nj) {
            let tu = (tb + j) * KU + u;
            let sx = txs[tu];
            let d = vec4<f32>(ls.x * sx.x);
            (*acc)[2u * j] = fma_x4(d, lane_dots(wv, 8u * tu, 0u), (*acc)[2u * j]);
            (*acc)[2u * j + 1u] = fma_x4(d, lane_dots(wv, 8u * tu, 1u), (*acc)[2u * j + 1u]);
            if (HAS_MIN) {
                (*m)[j] = (*m)[j] + keep(ls.y * sx.y); // exact product (two f16s)
            }
        }
    }
}

// Tiles of RT rows × TT tokens (quantized weights, several tokens).
@compute @workgroup_size(256)
fn tiled(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let row0 = (wid.x + wid.y * p.groups_x) * RT;
    let t0 = wid.z * TT;
    let nt = min(TT, p.n_tok - t0);
    // This invocation's outputs: tile row r, tokens tb .. tb + nj.
    let r = lid % RT;
    let tb = (lid / RT) * TPI;
    let nj = min(TPI, max(nt, tb) - tb);
    let units = p.cols / 32u;
    // QKIND 1: lane accumulators per block parity, minimums per parity (one per token).
    var acc0 = array<vec4<f32>, 8>();
    var acc1 = array<vec4<f32>, 8>();
    var m0 = vec4<f32>(0.0);
    var m1 = vec4<f32>(0.0);
    // QKIND 2/3: the current 256-block's integer sums, and the sum of finished blocks.
    var sumi = vec4<i32>(0);
    var summ = vec4<i32>(0);
    var sums = vec4<f32>(0.0);
    for (var k0 = 0u; k0 < units; k0 += KU) {
        let nu = min(KU, units - k0);
        stage(lid, row0, t0, nt, k0, nu);
        workgroupBarrier();
        if (QKIND == 2u) {
            stage_sums(lid);
            workgroupBarrier();
        }
        if (QKIND == 1u) {
            // k0 is even: staged units 0 and 2 have parity 0.
            for (var u = 0u; u < nu; u += 2u) {
                unit_into(u, r, tb, nj, &acc0, &m0);
                if (u + 1u < nu) {
                    unit_into(u + 1u, r, tb, nj, &acc1, &m1);
                }
            }
        } else {
            for (var u = 0u; u < nu; u++) {
                let wv = tile_words(u, r);
                let ks = bitcast<vec2<i32>>(tws[u * RT + r]);
                for (var j = 0u; j < TPI; j++) {
                    if (j < nj) {
                        let xw = 8u * ((tb + j) * KU + u);
                        var s0 = 0;
                        var s1 = 0;
                        for (var q = 0u; q < 4u; q++) {
                            s0 += dot_i8(wv[q], tx[xw + q]);
                            s1 += dot_i8(wv[q + 4u], tx[xw + q + 4u]);
                        }
                        if (QKIND == 2u) {
                            sumi[j] += ks.x * (s0 + s1);
                            summ[j] += ks.y * txb[(tb + j) * KU + u];
                        } else {
                            sumi[j] += ks.x * s0 + ks.y * s1;
                        }
                    }
                }
                // A K block ends: its float terms, added in block order (as `kblock`).
                if ((k0 + u) % 8u == 7u) {
                    let dm = tdm[r];
                    for (var j = 0u; j < TPI; j++) {
                        let da = txs[(tb + j) * KU + u].x;
                        sums[j] = sums[j] + kvalue(da, dm, sumi[j], summ[j]);
                    }
                    sumi = vec4<i32>(0);
                    summ = vec4<i32>(0);
                }
            }
        }
        workgroupBarrier();
    }
    if (row0 + r >= p.rows) {
        return;
    }
    let out0 = (t0 + tb) * p.out_stride + p.row0 + row0 + r;
    // A constant trip count (as every loop over j): unrolled, the accumulators are registers.
    for (var j = 0u; j < TPI; j++) {
        if (j < nj) {
            var v = 0.0;
            if (QKIND == 1u) {
                v = lanes_total(acc0[2u * j], acc0[2u * j + 1u], acc1[2u * j], acc1[2u * j + 1u], m0[j], m1[j]);
            } else {
                v = sums[j];
            }
            y[out0 + j * p.out_stride] = v;
        }
    }
}
