//! The layers of Wan's video VAE on whole clips: causal 3-D convolutions, the channel RMS norm,
//! residual blocks, the single-head per-frame attention and the 2-D / 3-D resamplers.
//!
//! diffusers runs the VAE a chunk of frames at a time, each causal convolution keeping the last
//! two frames of its input from the previous chunk. That cache makes every convolution exactly
//! a causal convolution over the whole clip, so these layers take the whole clip at once; the
//! two places where chunking changes the result (the time convolutions of `upsample3d` and
//! `downsample3d`, which skip the first chunk) are written out as what they compute on the
//! whole clip, see [`time_upsample`] and [`time_downsample`].

/// A clip of feature maps, `[channels, frames, height, width]` row-major.
#[derive(Debug, Clone, PartialEq)]
pub struct Clip {
    pub c: usize,
    pub t: usize,
    pub h: usize,
    pub w: usize,
    pub data: Vec<f32>,
}

impl Clip {
    pub fn zeros(c: usize, t: usize, h: usize, w: usize) -> Clip {
        Clip {
            c,
            t,
            h,
            w,
            data: vec![0.0; c * t * h * w],
        }
    }

    fn plane(&self) -> usize {
        self.h * self.w
    }

    /// The `[h, w]` plane of channel `c`, frame `t`.
    fn frame(&self, c: usize, t: usize) -> &[f32] {
        let p = self.plane();
        let at = (c * self.t + t) * p;
        &self.data[at..at + p]
    }

    fn frame_mut(&mut self, c: usize, t: usize) -> &mut [f32] {
        let p = self.plane();
        let at = (c * self.t + t) * p;
        &mut self.data[at..at + p]
    }

    /// Frames `from..to` of every channel.
    pub fn frames(&self, from: usize, to: usize) -> Clip {
        let mut out = Clip::zeros(self.c, to - from, self.h, self.w);
        for c in 0..self.c {
            for t in from..to {
                out.frame_mut(c, t - from).copy_from_slice(self.frame(c, t));
            }
        }
        out
    }

    /// `self` followed in time by `other` (same channels and size).
    pub fn concat_frames(&self, other: &Clip) -> Clip {
        let mut out = Clip::zeros(self.c, self.t + other.t, self.h, self.w);
        for c in 0..self.c {
            for t in 0..self.t {
                out.frame_mut(c, t).copy_from_slice(self.frame(c, t));
            }
            for t in 0..other.t {
                out.frame_mut(c, self.t + t)
                    .copy_from_slice(other.frame(c, t));
            }
        }
        out
    }

    fn add(&mut self, other: &Clip) {
        for (a, b) in self.data.iter_mut().zip(&other.data) {
            *a += b;
        }
    }
}

/// A convolution's weights: `[out, in, kt, kh, kw]` (2-D convolutions have `kt` 1) and bias.
pub struct Conv {
    pub out: usize,
    pub inp: usize,
    pub k: [usize; 3],
    pub weight: Vec<f32>,
    pub bias: Vec<f32>,
}

/// How a convolution pads and strides: `front` zero frames before the clip (none after), and
/// zero rows / columns `[top, bottom, left, right]`.
#[derive(Clone, Copy)]
pub struct Geometry {
    pub front: usize,
    pub pad: [usize; 4],
    pub stride: [usize; 3],
}

impl Geometry {
    /// Wan's causal convolution with symmetric spatial padding `p` (frames: 2·pad in front,
    /// which is `kt - 1`).
    pub fn causal(conv: &Conv, p: usize) -> Geometry {
        Geometry {
            front: conv.k[0] - 1,
            pad: [p; 4],
            stride: [1; 3],
        }
    }
}

impl Conv {
    /// The convolution of `x`, one output frame at a time: the input windows are gathered into
    /// a `[in·kt·kh·kw, out_h·out_w]` matrix (im2col) and multiplied by the weight rows.
    pub fn apply(&self, x: &Clip, g: Geometry) -> Clip {
        assert_eq!(x.c, self.inp, "convolution input channels");
        let [kt, kh, kw] = self.k;
        let [top, bottom, left, right] = g.pad;
        let [st, sh, sw] = g.stride;
        let (hp, wp, tp) = (x.h + top + bottom, x.w + left + right, x.t + g.front);
        assert!(
            tp >= kt && hp >= kh && wp >= kw,
            "convolution input too small"
        );
        let (ot, oh, ow) = ((tp - kt) / st + 1, (hp - kh) / sh + 1, (wp - kw) / sw + 1);
        let n = oh * ow;
        let kdim = self.inp * kt * kh * kw;
        let mut cols = vec![0f32; kdim * n];
        let mut out = Clip::zeros(self.out, ot, oh, ow);
        let mut acc = vec![0f32; n];
        for to in 0..ot {
            cols.fill(0.0);
            let mut row = 0;
            for i in 0..self.inp {
                for dt in 0..kt {
                    let tpad = to * st + dt;
                    for dh in 0..kh {
                        for dw in 0..kw {
                            let dst = &mut cols[row * n..(row + 1) * n];
                            row += 1;
                            // Frames in the causal padding stay zero.
                            if tpad < g.front {
                                continue;
                            }
                            let src = x.frame(i, tpad - g.front);
                            for yo in 0..oh {
                                let y = yo * sh + dh;
                                if y < top || y >= top + x.h {
                                    continue;
                                }
                                let srow = &src[(y - top) * x.w..(y - top + 1) * x.w];
                                for xo in 0..ow {
                                    let xx = xo * sw + dw;
                                    if xx >= left && xx < left + x.w {
                                        dst[yo * ow + xo] = srow[xx - left];
                                    }
                                }
                            }
                        }
                    }
                }
            }
            for o in 0..self.out {
                acc.fill(0.0);
                let wrow = &self.weight[o * kdim..(o + 1) * kdim];
                for (r, &wv) in wrow.iter().enumerate() {
                    for (a, &c) in acc.iter_mut().zip(&cols[r * n..(r + 1) * n]) {
                        *a += wv * c;
                    }
                }
                let b = self.bias[o];
                for (d, &a) in out.frame_mut(o, to).iter_mut().zip(&acc) {
                    *d = a + b;
                }
            }
        }
        out
    }
}

/// `WanRMS_norm`: each pixel's channel vector divided by its L2 norm (at least 1e-12), times
/// √C and a per-channel gain.
pub fn rms_norm(x: &Clip, gamma: &[f32]) -> Clip {
    let mut out = x.clone();
    let p = x.t * x.plane();
    let scale = (x.c as f64).sqrt() as f32;
    for i in 0..p {
        let sum: f32 = (0..x.c)
            .map(|c| x.data[c * p + i] * x.data[c * p + i])
            .sum();
        let norm = sum.sqrt().max(1e-12);
        for (c, &g) in gamma.iter().enumerate() {
            out.data[c * p + i] = x.data[c * p + i] / norm * scale * g;
        }
    }
    out
}

pub fn silu(x: &mut Clip) {
    for v in x.data.iter_mut() {
        *v /= 1.0 + (-*v).exp();
    }
}

/// `WanResidualBlock`: norm, SiLU, 3×3×3 causal conv, twice, plus the (1×1×1 conv) shortcut.
pub struct ResBlock {
    pub norm1: Vec<f32>,
    pub conv1: Conv,
    pub norm2: Vec<f32>,
    pub conv2: Conv,
    pub shortcut: Option<Conv>,
}

impl ResBlock {
    pub fn forward(&self, x: &Clip) -> Clip {
        let mut h = rms_norm(x, &self.norm1);
        silu(&mut h);
        let mut h = self.conv1.apply(&h, Geometry::causal(&self.conv1, 1));
        h = rms_norm(&h, &self.norm2);
        silu(&mut h);
        let mut h = self.conv2.apply(&h, Geometry::causal(&self.conv2, 1));
        match &self.shortcut {
            Some(s) => h.add(&s.apply(x, Geometry::causal(s, 0))),
            None => h.add(x),
        }
        h
    }
}

/// `WanAttentionBlock`: one head over the pixels of each frame, after an RMS norm; `to_qkv`
/// and `proj` are 1×1 convolutions.
pub struct Attention {
    pub norm: Vec<f32>,
    pub to_qkv: Conv,
    pub proj: Conv,
}

impl Attention {
    pub fn forward(&self, x: &Clip) -> Clip {
        let (c, p) = (x.c, x.plane());
        let qkv = self
            .to_qkv
            .apply(&rms_norm(x, &self.norm), Geometry::causal(&self.to_qkv, 0));
        let scale = 1.0 / (c as f32).sqrt();
        let mut attended = Clip::zeros(c, x.t, x.h, x.w);
        let mut scores = vec![0f32; p];
        let mut q = vec![0f32; c];
        let mut acc = vec![0f32; c];
        for t in 0..x.t {
            // Pixel-major copies of the keys and values: rows of `c` for the inner loops.
            let gather = |from: usize| -> Vec<f32> {
                let mut m = vec![0f32; p * c];
                for ch in 0..c {
                    for (j, &v) in qkv.frame(from + ch, t).iter().enumerate() {
                        m[j * c + ch] = v;
                    }
                }
                m
            };
            let (k, v) = (gather(c), gather(2 * c));
            for i in 0..p {
                for (ch, qv) in q.iter_mut().enumerate() {
                    *qv = qkv.frame(ch, t)[i];
                }
                let mut max = f32::NEG_INFINITY;
                for (j, s) in scores.iter_mut().enumerate() {
                    let dot: f32 = q
                        .iter()
                        .zip(&k[j * c..(j + 1) * c])
                        .map(|(a, b)| a * b)
                        .sum();
                    *s = dot * scale;
                    max = max.max(*s);
                }
                let mut sum = 0f32;
                for s in scores.iter_mut() {
                    *s = (*s - max).exp();
                    sum += *s;
                }
                acc.fill(0.0);
                for (j, &s) in scores.iter().enumerate() {
                    for (a, &vv) in acc.iter_mut().zip(&v[j * c..(j + 1) * c]) {
                        *a += s * vv;
                    }
                }
                for (ch, &a) in acc.iter().enumerate() {
                    attended.frame_mut(ch, t)[i] = a / sum;
                }
            }
        }
        let mut out = self.proj.apply(&attended, Geometry::causal(&self.proj, 0));
        out.add(x);
        out
    }
}

/// `WanMidBlock` with one attention layer: residual block, attention, residual block.
pub struct MidBlock {
    pub res0: ResBlock,
    pub attn: Attention,
    pub res1: ResBlock,
}

impl MidBlock {
    pub fn forward(&self, x: &Clip) -> Clip {
        let x = self.res0.forward(x);
        let x = self.attn.forward(&x);
        self.res1.forward(&x)
    }
}

/// Nearest 2× in height and width (`nearest-exact` at an exact factor of 2 reads source pixel
/// `i / 2`), then a 3×3 convolution (padding 1): `upsample2d`, frame by frame.
pub fn upsample2d(x: &Clip, conv: &Conv) -> Clip {
    let mut up = Clip::zeros(x.c, x.t, 2 * x.h, 2 * x.w);
    for c in 0..x.c {
        for t in 0..x.t {
            let src = x.frame(c, t).to_vec();
            let w2 = 2 * x.w;
            let dst = up.frame_mut(c, t);
            for (y, row) in dst.chunks_mut(w2).enumerate() {
                for (xx, d) in row.iter_mut().enumerate() {
                    *d = src[(y / 2) * x.w + xx / 2];
                }
            }
        }
    }
    conv.apply(
        &up,
        Geometry {
            front: 0,
            pad: [1; 4],
            stride: [1; 3],
        },
    )
}

/// Zero row and column added at the bottom and right, then a stride-2 3×3 convolution:
/// `downsample2d`, frame by frame.
pub fn downsample2d(x: &Clip, conv: &Conv) -> Clip {
    conv.apply(
        x,
        Geometry {
            front: 0,
            pad: [0, 1, 0, 1],
            stride: [1, 2, 2],
        },
    )
}

/// The time half of `upsample3d` (`time_conv`, C → 2C channels, kernel 3 in time) on a whole
/// decoded clip. diffusers skips it for the first latent frame's chunk (that frame passes
/// through) and starts its cache at the second chunk with zeros, so the convolution runs
/// causally over frames `1..` alone; each of its output frames becomes two frames, the first C
/// channels then the last C. `t` frames give `1 + 2(t - 1)`.
pub fn time_upsample(x: &Clip, conv: &Conv) -> Clip {
    let c = x.c;
    if x.t == 1 {
        return x.clone();
    }
    let rest = conv.apply(&x.frames(1, x.t), Geometry::causal(conv, 0));
    let mut out = Clip::zeros(c, 1 + 2 * rest.t, x.h, x.w);
    for ch in 0..c {
        out.frame_mut(ch, 0).copy_from_slice(x.frame(ch, 0));
        for t in 0..rest.t {
            out.frame_mut(ch, 1 + 2 * t)
                .copy_from_slice(rest.frame(ch, t));
            out.frame_mut(ch, 2 + 2 * t)
                .copy_from_slice(rest.frame(c + ch, t));
        }
    }
    out
}

/// The time half of `downsample3d` (`time_conv`, kernel 3, stride 2 in time, no padding) on a
/// whole clip encoded in diffusers' chunks of 1, 4, 4, ... input frames: the first chunk skips
/// it (frame 0 passes through) and each later chunk is convolved after the previous chunk's
/// last frame, which on the whole clip is frame 0 followed by the stride-2 convolution over
/// all frames. `1 + 2n` frames give `1 + n`.
pub fn time_downsample(x: &Clip, conv: &Conv) -> Clip {
    let g = Geometry {
        front: 0,
        pad: [0; 4],
        stride: [2, 1, 1],
    };
    let first = x.frames(0, 1);
    if x.t < 3 {
        return first;
    }
    first.concat_frames(&conv.apply(x, g))
}
