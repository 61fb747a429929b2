#!/usr/bin/env python3
"""Kernel-by-kernel check of cuda-ext/kernels/ against numpy, for a GPU machine with CuPy.

`weft parity` compares whole products with the CPU backend's; when they differ, this finds the
piece: f16 conversions and byte loads, the Q8_0/Q8_1 activation quantizers (bytes against a
numpy quantizer rounding as core/src/quant/dot/act.rs does), and each product form (matvec,
matmul, matmul_tiled) for Q8_0/Q4_0/Q5_0/Q4_1 on random blocks, once with activations
quantized by numpy and once by the GPU. It found the activation-scale bug fixed on 2026-12-04
(common.cuh, f32_to_f16_bits). Run from the repository root: python3 bench/cuda-kernels.py
(exit status 1 on any difference past the bounds printed).
"""
import sys, traceback
import numpy as np
import cupy as cp

failed = []
K = 'cuda-ext/kernels/'
src = open(K+'common.cuh').read()+'\n'+open(K+'quant.cuh').read()+'\n'+open(K+'matvec.cu').read()
src += r'''
extern "C" __global__ void t_f16(const float* x, u16* o, int n) { int i = blockIdx.x*blockDim.x+threadIdx.x; if (i < n) o[i] = f32_to_f16(x[i]); }
extern "C" __global__ void t_f16b(const u16* x, float* o, int n) { int i = blockIdx.x*blockDim.x+threadIdx.x; if (i < n) o[i] = f16_to_f32(x[i]); }
extern "C" __global__ void t_ld(const u8* p, u32* o, int n) { int i = blockIdx.x*blockDim.x+threadIdx.x; if (i < n) o[i] = load_u32(p + 2*i + 2); }
'''
# The options weft compiles with (cuda-ext/src/nvrtc.rs, options()).
opts = ('--gpu-architecture=compute_90','--std=c++17','--ftz=false','--prec-div=true','--prec-sqrt=true','--fmad=false','--device-as-default-execution-space')
mod = cp.RawModule(code=src, options=opts, backend='nvrtc')
fn = mod.get_function
rng = np.random.default_rng(1)
def u32(v): return np.uint32(v)
def run(name, grid, block, args): fn(name)(grid, block, args); cp.cuda.Device().synchronize()

def q8_ref(x, with_sum=False):
    rows, cols = x.shape; nb = cols // 32; bs = 36 if with_sum else 34
    out = np.zeros((rows, nb, bs), np.uint8)
    for r in range(rows):
        for b in range(nb):
            v = x[r, b*32:(b+1)*32]; amax = np.float32(np.abs(v).max())
            idv = np.float32(127.0)/amax if amax != 0 else np.float32(0)
            q = np.clip(np.rint(v*idv), -127, 127).astype(np.int32)
            d = np.float32(amax/np.float32(127.0))
            off = 4 if with_sum else 2
            out[r, b, off:] = q.astype(np.int8).view(np.uint8)
            out[r, b, 0:2] = np.array([d], np.float16).view(np.uint8)
            if with_sum: out[r, b, 2:4] = np.array([d*np.float32(q.sum())], np.float16).view(np.uint8)
    return out.reshape(rows, -1)

def f16_scales(rows, nb, lo, hi):
    """Random f16 block scales in [lo, hi) as (rows, nb, 2) bytes."""
    return rng.uniform(lo, hi, (rows, nb)).astype(np.float16).view(np.uint8).reshape(rows, nb, 2)

def f16_at(a):
    """The f16 values held in the last axis's byte pairs of `a`, as float64."""
    return a.copy().view(np.float16).astype(np.float64)

def check(name, f):
    try: f()
    except Exception:
        failed.append(name); print(name, 'EXCEPTION'); traceback.print_exc(limit=3)

def t_conv():
    x = (rng.standard_normal(100000)*rng.choice([1e-3,1,100], 100000)).astype(np.float32)
    o = cp.zeros(x.size, cp.uint16); run('t_f16', ((x.size+255)//256,), (256,), (cp.asarray(x), o, np.int32(x.size)))
    want = x.astype(np.float16).view(np.uint16); got = o.get()
    bad = np.nonzero(want != got)[0]
    if bad.size: failed.append('f32_to_f16')
    print('f32_to_f16 mismatches', bad.size, 'of', x.size, [(float(x[i]), hex(want[i]), hex(got[i])) for i in bad[:5]])
    h = rng.integers(0, 0x7c00, 100000).astype(np.uint16)
    o2 = cp.zeros(h.size, cp.float32); run('t_f16b', ((h.size+255)//256,), (256,), (cp.asarray(h), o2, np.int32(h.size)))
    bad2 = int((o2.get() != h.view(np.float16).astype(np.float32)).sum())
    if bad2: failed.append('f16_to_f32')
    print('f16_to_f32 mismatches', bad2)
    p = rng.integers(0, 256, 4000).astype(np.uint8)
    o3 = cp.zeros(1000, cp.uint32); run('t_ld', (4,), (256,), (cp.asarray(p), o3, np.int32(1000)))
    want = np.array([int.from_bytes(bytes(p[2*i+2:2*i+6]), 'little') for i in range(1000)], np.uint32)
    bad3 = int((o3.get() != want).sum())
    if bad3: failed.append('load_u32')
    print('load_u32 mismatches', bad3)

def t_quant():
    for kname, ws in (('quantize_q8_0', False), ('quantize_q8_1', True)):
        rows, cols = 3, 4864; nb = cols//32; bs = 36 if ws else 34
        x = rng.uniform(-1, 1, (rows, cols)).astype(np.float32)
        out = cp.zeros(rows*nb*bs, cp.uint8)
        run(kname, ((nb+3)//4, rows), (128,), (cp.asarray(x), out, u32(cols)))
        got = out.get().reshape(rows, nb, bs); want = q8_ref(x, ws).reshape(rows, nb, bs)
        off = 4 if ws else 2
        dq = (got[:, :, 0:2] != want[:, :, 0:2]).any(-1); qq = (got[:, :, off:] != want[:, :, off:])
        if dq.sum() or qq.sum(): failed.append(kname)
        print(kname, 'blocks with a different d:', int(dq.sum()), 'of', rows*nb, ' quant bytes different:', int(qq.sum()))
        if qq.sum():
            r, b, i = [int(v[0]) for v in np.nonzero(qq)]
            print('   first at row', r, 'block', b, 'byte', i, 'got', got[r, b, off:][:8], 'want', want[r, b, off:][:8])

def deq_act(a, nb, ws):
    bs = 36 if ws else 34; a = a.reshape(-1, nb, bs); off = 4 if ws else 2
    d = f16_at(a[:, :, 0:2])
    q = a[:, :, off:].view(np.int8).astype(np.float64)
    return (d*q).reshape(a.shape[0], -1)

def t_matvec():
    rows, cols, toks = 64, 4864, 3; nb = cols//32
    x = rng.uniform(-1, 1, (toks, cols)).astype(np.float32)
    for ty, ws in (('q8_0', False), ('q4_0', False), ('q5_0', False), ('q4_1', True)):
        # random weight blocks: f16 scale(s), then quants
        if ty == 'q8_0':
            blk = np.zeros((rows, nb, 34), np.uint8); blk[:, :, 2:] = rng.integers(0, 256, (rows, nb, 32))
            blk[:, :, 0:2] = f16_scales(rows, nb, 0.001, 0.01)
            w = f16_at(blk[:, :, 0:2]) * blk[:, :, 2:].view(np.int8).astype(np.float64)
        elif ty in ('q4_0', 'q4_1'):
            bs = 18 if ty == 'q4_0' else 20; o = bs - 16
            blk = np.zeros((rows, nb, bs), np.uint8); blk[:, :, o:] = rng.integers(0, 256, (rows, nb, 16))
            blk[:, :, 0:2] = f16_scales(rows, nb, 0.001, 0.01)
            if ty == 'q4_1': blk[:, :, 2:4] = f16_scales(rows, nb, -0.05, 0.05)
            qs = blk[:, :, o:]; q = np.concatenate([qs & 15, qs >> 4], -1).astype(np.float64)
            d = f16_at(blk[:, :, 0:2])
            w = d*(q-8) if ty == 'q4_0' else d*q + f16_at(blk[:, :, 2:4])
        else:  # q5_0
            blk = np.zeros((rows, nb, 22), np.uint8); blk[:, :, 2:] = rng.integers(0, 256, (rows, nb, 20))
            blk[:, :, 0:2] = f16_scales(rows, nb, 0.001, 0.01)
            qh = blk[:, :, 2:6].copy().view(np.uint32)[..., 0]
            qs = blk[:, :, 6:]; q = np.concatenate([qs & 15, qs >> 4], -1).astype(np.int64)
            q |= ((qh[..., None] >> np.arange(32)) & 1).astype(np.int64) << 4
            w = f16_at(blk[:, :, 0:2]) * (q - 16)
        w = w.reshape(rows, cols)
        act = q8_ref(x, ws); ref = deq_act(act, nb, ws) @ w.T
        for kind in ('host-quantized act', 'gpu-quantized act'):
            if kind.startswith('host'): a = cp.asarray(act.reshape(-1))
            else:
                a = cp.zeros(act.size, cp.uint8); run('quantize_q8_1' if ws else 'quantize_q8_0', ((nb+3)//4, toks), (128,), (cp.asarray(x), a, u32(cols)))
            for form in ('matvec', 'matmul', 'matmul_tiled'):
                out = cp.zeros(toks*rows, cp.float32)
                if form == 'matvec': run(f'matvec_{ty}', ((rows+3)//4, toks), (128,), (cp.asarray(blk.reshape(-1)), a, out, u32(rows), u32(cols)))
                elif form == 'matmul': run(f'matmul_{ty}', ((rows+3)//4, (toks+7)//8), (128,), (cp.asarray(blk.reshape(-1)), a, out, u32(rows), u32(cols), u32(toks)))
                else: run(f'matmul_tiled_{ty}', ((rows+31)//32, (toks+31)//32), (128,), (cp.asarray(blk.reshape(-1)), a, out, u32(rows), u32(cols), u32(toks)))
                got = out.get().reshape(toks, rows)
                err = np.abs(got-ref).max()/np.abs(ref).max()
                # Q4_1's min term uses the f16-rounded d·Σq that Q8_1 stores, the reference the exact sum.
                bound = 1e-3 if ty == 'q4_1' else 1e-5
                if not err <= bound: failed.append(f'{ty} {form} {kind}')
                print(f'{ty} {form:13s} {kind}: max rel err {err:.3e} (bound {bound:.0e})')

for n, f in (('conv', t_conv), ('quant', t_quant), ('matvec', t_matvec)): check(n, f)
print('FAILED: ' + ', '.join(failed) if failed else 'all kernels agree')
sys.exit(1 if failed else 0)
