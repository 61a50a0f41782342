/* cambi on the GPU: the per-pixel stages of src/feature/cambi/cpu.rs (preprocess, spatial_mask,
 * decimate, filter_mode, the c-values of CValueCtx), each out of place.
 *
 *   preprocess   luma -> 10 bits at the processing size (host-computed nearest-neighbour taps),
 *                plus the 2x2 anti-dithering average for encodes below 10 bits
 *   mask         flat-area mask (7x7 counts of zero-derivative pixels above a threshold),
 *                evaluated only where the first scale samples it
 *   scale        one scale's picture: decimation (every second row and column) and the
 *                separable 3x3 mode filter (edge columns and first/last rows kept), plus the
 *                window values the c-value kernels count
 *   cvalues      per-pixel c-values from counts of nearby luma levels in the window, and the
 *                exact integer statistics of the map (non-zero count, significand sums per
 *                exponent) from which the host can often pool without the map
 *
 * Everything is integer except the c-value product, which is one correctly rounded
 * int->float conversion and one correctly rounded multiply, as on the CPU, so the maps are
 * bit-identical. The window counts are the CPU's numbers: `cvalues_slide` keeps a histogram
 * per window column in shared memory and slides it down the rows, as the CPU slides its
 * histograms; `cvalues` counts each window directly where that table does not fit. */
#include "vmaf_prelude.h"

/* Largest window half-width: the host rejects windows whose area exceeds the 4226-entry
 * reciprocal table, so 65x65 is the largest. */
#define CAMBI_MAX_PAD 32
#define CAMBI_MAX_DIFFS 32
#define CAMBI_TILE 16
#define CAMBI_SPAN (CAMBI_TILE + 2 * CAMBI_MAX_PAD)
/* Window value of a pixel that is unmasked, out of the band or outside the picture: far from
 * any band value, so it is never counted. */
#define CAMBI_NONE 0xFFFF

#define CAMBI_MASK_BW 32
#define CAMBI_MASK_BH 8
#define CAMBI_MASK_PAD 3

VMAF_DEVICE vmaf_u32 cambi_to10(vmaf_u32 v, int bpc)
{
    if (bpc >= 10) {
        const int shift = bpc - 10;
        const vmaf_u32 round = shift == 0 ? 0u : (1u << (shift - 1));
        return ((v + round) >> shift) & 0xFFFFu;
    }
    return (v << (10 - bpc)) & 0xFFFFu;
}

/* `taps` holds the source column of each output column (out_w entries) then the source row of
 * each output row (out_h entries); they are clamped so a bad table cannot read outside. */
template <typename T>
VMAF_DEVICE vmaf_u32 cambi_sample(const T *src, int in_w, int in_h, int in_stride,
                                  const vmaf_u32 *taps, int out_w, bool same, int i, int j,
                                  int bpc)
{
    vmaf_u32 sx = same ? (vmaf_u32)j : taps[j];
    vmaf_u32 sy = same ? (vmaf_u32)i : taps[out_w + i];
    if (sx >= (vmaf_u32)in_w)
        sx = in_w - 1;
    if (sy >= (vmaf_u32)in_h)
        sy = in_h - 1;
    return cambi_to10(src[(vmaf_u64)sy * in_stride + sx], bpc);
}

/* The CPU averages in place, but each output reads only itself and pixels right of and below
 * it, which are still unmodified, so averaging the converted samples is the same. */
template <typename T>
VMAF_DEVICE void cambi_preprocess(const T *src, int in_w, int in_h, int in_stride,
                                  const vmaf_u32 *taps, int bpc, int dither, vmaf_u16 *out,
                                  int out_w, int out_h, int out_stride)
{
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    const int i = blockIdx.y * blockDim.y + threadIdx.y;
    if (i >= out_h || j >= out_w)
        return;
    // At the source size the taps are the identity (as the host fills them): skip their loads.
    const bool same = in_w == out_w && in_h == out_h;
#define CAMBI_AT(di, dj) \
    cambi_sample(src, in_w, in_h, in_stride, taps, out_w, same, i + (di), j + (dj), bpc)
    const vmaf_u32 c = CAMBI_AT(0, 0);
    vmaf_u32 v = c;
    if (dither) {
        const bool right = j + 1 < out_w;
        const bool down = i + 1 < out_h;
        if (right && down)
            v = (c + CAMBI_AT(0, 1) + CAMBI_AT(1, 0) + CAMBI_AT(1, 1)) >> 2;
        else if (down)
            v = (c + CAMBI_AT(1, 0)) >> 1;
        else if (right)
            v = (c + CAMBI_AT(0, 1)) >> 1;
    }
#undef CAMBI_AT
    out[(vmaf_u64)i * out_stride + j] = (vmaf_u16)v;
}

VMAF_KERNEL void vmaf_cambi_preprocess_u8(const vmaf_u8 *src, int in_w, int in_h, int in_stride,
                                          const vmaf_u32 *taps, int bpc, int dither,
                                          vmaf_u16 *out, int out_w, int out_h, int out_stride)
{
    cambi_preprocess(src, in_w, in_h, in_stride, taps, bpc, dither, out, out_w, out_h,
                     out_stride);
}

VMAF_KERNEL void vmaf_cambi_preprocess_u16(const vmaf_u16 *src, int in_w, int in_h,
                                           int in_stride, const vmaf_u32 *taps, int bpc,
                                           int dither, vmaf_u16 *out, int out_w, int out_h,
                                           int out_stride)
{
    cambi_preprocess(src, in_w, in_h, in_stride, taps, bpc, dither, out, out_w, out_h,
                     out_stride);
}

/* flag[0] = 1 when a sample of the w x h plane exceeds `max` (left as it is otherwise): the
 * input range check of 9..15-bit pictures, which the CPU path makes before scoring. Launch
 * with CAMBI_PIXEL blocks (32 x 8). */
template <typename T>
VMAF_DEVICE void cambi_range(const T *src, int w, int h, int stride, vmaf_u32 max,
                             vmaf_u64 *flag)
{
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    const int i = blockIdx.y * blockDim.y + threadIdx.y;
    if (i < h && j < w && (vmaf_u32)src[(vmaf_u64)i * stride + j] > max)
        *flag = 1;
}

VMAF_KERNEL void vmaf_cambi_range_u8(const vmaf_u8 *src, int w, int h, int stride,
                                     vmaf_u32 max, vmaf_u64 *flag)
{
    cambi_range(src, w, h, stride, max, flag);
}

VMAF_KERNEL void vmaf_cambi_range_u16(const vmaf_u16 *src, int w, int h, int stride,
                                      vmaf_u32 max, vmaf_u64 *flag)
{
    cambi_range(src, w, h, stride, max, flag);
}

/* Whether pixel (r, c) equals its right and lower neighbours (picture edges count as equal);
 * 0 outside the picture. */
VMAF_DEVICE vmaf_u32 cambi_flat(const vmaf_u16 *img, int w, int h, int stride, int r, int c)
{
    if (r < 0 || r >= h || c < 0 || c >= w)
        return 0;
    const vmaf_u16 *p = img + (vmaf_u64)r * stride + c;
    const bool right = c + 1 == w || p[0] == p[1];
    const bool down = r + 1 == h || p[0] == p[stride];
    return (right && down) ? 1u : 0u;
}

/* mask (mw x mh) = the flat-area mask of img (w x h) at every `step`-th row and column
 * (step 1 or 2: the first scale's sampling of it). Launch with CAMBI_MASK_BW x CAMBI_MASK_BH
 * blocks. */
VMAF_KERNEL void vmaf_cambi_mask(const vmaf_u16 *img, int w, int h, int stride,
                                 vmaf_u32 threshold, int step, vmaf_u16 *mask, int mw, int mh,
                                 int mask_stride)
{
    __shared__ vmaf_u8 flat[2 * CAMBI_MASK_BH + 2 * CAMBI_MASK_PAD]
                           [2 * CAMBI_MASK_BW + 2 * CAMBI_MASK_PAD];
    VMAF_ASSUME(step == 1 || step == 2, "cambi mask step");
    const int x0 = blockIdx.x * CAMBI_MASK_BW * step - CAMBI_MASK_PAD;
    const int y0 = blockIdx.y * CAMBI_MASK_BH * step - CAMBI_MASK_PAD;
    const int tw = CAMBI_MASK_BW * step + 2 * CAMBI_MASK_PAD;
    const int th = CAMBI_MASK_BH * step + 2 * CAMBI_MASK_PAD;
    for (int k = threadIdx.y * CAMBI_MASK_BW + threadIdx.x; k < tw * th;
         k += CAMBI_MASK_BW * CAMBI_MASK_BH)
        flat[k / tw][k % tw] = (vmaf_u8)cambi_flat(img, w, h, stride, y0 + k / tw, x0 + k % tw);
    __syncthreads();
    const int c = blockIdx.x * CAMBI_MASK_BW + threadIdx.x;
    const int r = blockIdx.y * CAMBI_MASK_BH + threadIdx.y;
    if (r >= mh || c >= mw)
        return;
    const int ty = threadIdx.y * step, tx = threadIdx.x * step;
    vmaf_u32 sum = 0;
    for (int dy = 0; dy <= 2 * CAMBI_MASK_PAD; dy++)
        for (int dx = 0; dx <= 2 * CAMBI_MASK_PAD; dx++)
            sum += flat[ty + dy][tx + dx];
    mask[(vmaf_u64)r * mask_stride + c] = sum > threshold ? 1 : 0;
}

VMAF_DEVICE vmaf_u16 cambi_mode3(vmaf_u16 a, vmaf_u16 b, vmaf_u16 c)
{
    if (a == b || a == c)
        return a;
    if (b == c)
        return b;
    vmaf_u16 m = a < b ? a : b;
    return m < c ? m : c;
}

/* Sample (r, c) of a scale's input: the previous picture at every `step`-th row and column. */
VMAF_DEVICE vmaf_u16 cambi_at(const vmaf_u16 *prev, int stride, int step, int r, int c)
{
    return prev[(vmaf_u64)(r * step) * stride + (vmaf_u64)(c * step)];
}

/* Horizontal mode of row r at column j (edge columns unfiltered). */
VMAF_DEVICE vmaf_u16 cambi_hmode(const vmaf_u16 *prev, int stride, int step, int w, int r,
                                 int j)
{
    if (j == 0 || j == w - 1)
        return cambi_at(prev, stride, step, r, j);
    return cambi_mode3(cambi_at(prev, stride, step, r, j - 1),
                       cambi_at(prev, stride, step, r, j),
                       cambi_at(prev, stride, step, r, j + 1));
}

/* One scale's w x h picture: `prev` (the previous scale's picture, or the preprocessed one)
 * read at every `step`-th row and column (2 decimates), mode filtered into `mode` (dense, w
 * wide), and its window values into `wv` (dense): the band value (luma - band_base) of each
 * pixel the mask keeps and the band holds, CAMBI_NONE elsewhere. `mask` is the first scale's
 * mask, read at every `mstep`-th row and column. */
VMAF_KERNEL void vmaf_cambi_scale(const vmaf_u16 *prev, int prev_stride, int step,
                                  const vmaf_u16 *mask, int mask_stride, int mstep,
                                  int band_base, int band_size, vmaf_u16 *mode, vmaf_u16 *wv,
                                  int w, int h)
{
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    const int i = blockIdx.y * blockDim.y + threadIdx.y;
    if (i >= h || j >= w)
        return;
    vmaf_u16 v;
    if (i == 0 || i == h - 1)
        v = cambi_at(prev, prev_stride, step, i, j);
    else
        v = cambi_mode3(cambi_hmode(prev, prev_stride, step, w, i - 1, j),
                        cambi_hmode(prev, prev_stride, step, w, i, j),
                        cambi_hmode(prev, prev_stride, step, w, i + 1, j));
    const vmaf_u64 at = (vmaf_u64)i * w + j;
    mode[at] = v;
    const int b = (int)v - band_base;
    const bool keep = mask[(vmaf_u64)(i * mstep) * mask_stride + (vmaf_u64)(j * mstep)] != 0;
    wv[at] = (keep && b >= 0 && b < band_size) ? (vmaf_u16)b : (vmaf_u16)CAMBI_NONE;
}

/* The c-value of a pixel from the window counts: counts[nd + d] pixels have the band value
 * center + d. `value` is the "adjusted" luma (luma + nd) the thresholds compare, as on the
 * CPU; the product is one rounded conversion and one rounded multiply. */
VMAF_DEVICE float cambi_c_value(const vmaf_u32 *counts, int nd, int value, int vlt,
                                const vmaf_i32 *params, const float *lut)
{
    float c_value = 0.0f;
    const int p0 = (int)counts[nd];
    // Every step's table entry is loaded whether or not its thresholds admit it (the index,
    // two counts of one window, is always inside the table), so the loads do not wait on one
    // another behind the branches.
#pragma unroll 4
    for (int d = 0; d < nd; d++) {
        const int step = d + 1;
        const int p1 = (int)counts[nd + step];
        const int p2 = (int)counts[nd - step];
        const int p = p1 > p2 ? p1 : p2;
        const float inv = lut[p + p0];
        const int num = params[nd + d] * p0 * p;
        const float val = __fmul_rn(__int2float_rn(num), inv);
        if (value <= params[d] && value + step > vlt && val > c_value)
            c_value = val;
    }
    return c_value;
}

#define CAMBI_STATS_BUCKETS 256

/* A block's share of a c-value map's statistics: out[0] += the count of non-zero values;
 * out[1 + e] += the integer significands (implicit bit included) of the values whose biased
 * exponent is e, subnormals counted under e = 1 (the same scale). Integer sums, so the result
 * does not depend on the order. In shared memory each significand is split into two 12-bit
 * halves summed in 32 bits (no block has 2^20 outputs), because 32-bit shared atomics are
 * native everywhere while 64-bit ones are compare-and-swap loops on some GPUs, which lanes
 * adding to one bucket at once serialise. */
struct CambiStats {
    vmaf_u32 lo[CAMBI_STATS_BUCKETS];
    vmaf_u32 hi[CAMBI_STATS_BUCKETS];
    vmaf_u32 nonzero;
};

VMAF_DEVICE void cambi_stats_zero(CambiStats *st)
{
    for (unsigned b = vmaf_thread_rank(); b < CAMBI_STATS_BUCKETS;
         b += blockDim.x * blockDim.y) {
        st->lo[b] = 0;
        st->hi[b] = 0;
    }
    if (vmaf_thread_rank() == 0)
        st->nonzero = 0;
}

/* Adds one c-value (shared atomics only: no wave-wide step, so blocks narrower than a wave
 * are fine). */
VMAF_DEVICE void cambi_stats_add(CambiStats *st, float v)
{
    const vmaf_u32 bits = __float_as_uint(v);
    if (bits == 0)
        return;
    vmaf_u32 e = (bits >> 23) & 0xFFu;
    vmaf_u32 m = bits & 0x7FFFFFu;
    if (e == 0)
        e = 1;
    else
        m |= 0x800000u;
    atomicAdd(&st->lo[e], m & 0xFFFu);
    atomicAdd(&st->hi[e], m >> 12);
    atomicAdd(&st->nonzero, 1u);
}

/* Every thread of the block calls this once, after its last cambi_stats_add. */
VMAF_DEVICE void cambi_stats_flush(CambiStats *st, vmaf_u64 *out)
{
    __syncthreads();
    if (vmaf_thread_rank() == 0 && st->nonzero != 0)
        VMAF_ATOMIC_ADD_U64(out, (vmaf_u64)st->nonzero);
    for (unsigned b = vmaf_thread_rank(); b < CAMBI_STATS_BUCKETS;
         b += blockDim.x * blockDim.y) {
        const vmaf_u64 sum = ((vmaf_u64)st->hi[b] << 12) + st->lo[b];
        if (sum != 0)
            VMAF_ATOMIC_ADD_U64(out + 1 + b, sum);
    }
}

/* Loads the window values of every pixel the block's windows cover into `tile` (span x span,
 * span = CAMBI_TILE + 2 * pad), CAMBI_NONE outside the picture. */
VMAF_DEVICE void cambi_load_tile(vmaf_u16 *tile, const vmaf_u16 *wv, int w, int h, int pad)
{
    const int span = CAMBI_TILE + 2 * pad;
    const int x0 = blockIdx.x * CAMBI_TILE - pad;
    const int y0 = blockIdx.y * CAMBI_TILE - pad;
    for (int k = threadIdx.y * CAMBI_TILE + threadIdx.x; k < span * span;
         k += CAMBI_TILE * CAMBI_TILE) {
        const int r = y0 + k / span;
        const int c = x0 + k % span;
        tile[k] = (r >= 0 && r < h && c >= 0 && c < w) ? wv[(vmaf_u64)r * w + c]
                                                       : (vmaf_u16)CAMBI_NONE;
    }
    __syncthreads();
}

/* The c-values of a w x h scale into cv (dense, w wide) from its window values `wv`, and their
 * statistics added to stats[0..257] (zeroed by the caller). `params` holds tvi[0..nd]
 * (adjusted thresholds) then the contrast weights[0..nd]; `lut` the reciprocal table (>
 * (2*pad+1)^2 entries). This kernel counts each window directly: launch with CAMBI_TILE x
 * CAMBI_TILE blocks; pad <= CAMBI_MAX_PAD, nd <= CAMBI_MAX_DIFFS; `rows` is unused (the
 * signature is vmaf_cambi_cvalues_slide's). */
VMAF_KERNEL void vmaf_cambi_cvalues(const vmaf_u16 *wv, int w, int h, int pad, int band_base,
                                    int band_size, int nd, int vlt, const vmaf_i32 *params,
                                    const float *lut, int rows, float *cv, vmaf_u64 *stats)
{
    __shared__ vmaf_u16 tile[CAMBI_SPAN * CAMBI_SPAN];
    __shared__ CambiStats st;
    (void)rows;
    cambi_stats_zero(&st);
    cambi_load_tile(tile, wv, w, h, pad);
    const int span = CAMBI_TILE + 2 * pad;
    const int col = blockIdx.x * CAMBI_TILE + threadIdx.x;
    const int row = blockIdx.y * CAMBI_TILE + threadIdx.y;
    if (row < h && col < w) {
        const int center = tile[(threadIdx.y + pad) * span + threadIdx.x + pad];
        float c_value = 0.0f;
        if (center < band_size) {
            vmaf_u32 counts[2 * CAMBI_MAX_DIFFS + 1];
            for (int k = 0; k <= 2 * nd; k++)
                counts[k] = 0;
            const vmaf_u32 range = 2 * nd;
            const int side = 2 * pad + 1;
            for (int dy = 0; dy < side; dy++) {
                const vmaf_u16 *t = tile + (threadIdx.y + dy) * span + threadIdx.x;
                for (int dx = 0; dx < side; dx++) {
                    const vmaf_u32 d = (vmaf_u32)((int)t[dx] - center + nd);
                    if (d <= range)
                        counts[d]++;
                }
            }
            c_value = cambi_c_value(counts, nd, center + band_base + nd, vlt, params, lut);
        }
        cv[(vmaf_u64)row * w + col] = c_value;
        cambi_stats_add(&st, c_value);
    }
    cambi_stats_flush(&st, stats);
}

/* The sliding c-value kernels: W output columns (and threads) per block, for CAMBI_SLIDE_ND
 * contrast steps (the default max_log_contrast of 2) only, so the window counts live in
 * registers. Band value v has histogram row v + CAMBI_SLIDE_GUARD: the guard rows stay zero,
 * so every count slot of a window reads a row. */
#define CAMBI_SLIDE_W 32
/* The wide variant: four waves of 32 share one set of column histograms, whose 2 * pad
 * columns of overlap are then paid once per 128 outputs instead of per 32, so twice as many
 * waves fit a multiprocessor; its tables are dynamic shared memory (above the 48 KiB a CUDA
 * block gets without opting in), at most CAMBI_WIDE_BYTES so that two blocks share a 228 KiB
 * multiprocessor. */
#define CAMBI_WIDE_W 128
#define CAMBI_WIDE_BYTES 110592
#define CAMBI_SLIDE_ND 4
#define CAMBI_SLIDE_K (2 * CAMBI_SLIDE_ND + 1)
#define CAMBI_SLIDE_GUARD CAMBI_SLIDE_ND
/* Shared bytes of the two entry points (histograms, then the staged window values). */
#define CAMBI_SLIDE_BYTES 32768
#define CAMBI_SLIDE_BIG_BYTES 45056

/* The sum of the bytes masked by m in x, added to acc. */
VMAF_DEVICE vmaf_u32 cambi_byte_sum(vmaf_u32 x, vmaf_u32 m, vmaf_u32 acc)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 610 && !defined(__HIP__)
    vmaf_u32 r;
    asm("dp4a.u32.u32 %0, %1, %2, %3;" : "=r"(r) : "r"(x), "r"(m & 0x01010101u), "r"(acc));
    return r;
#else
    x &= m;
    const vmaf_u32 t = (x & 0x00FF00FFu) + ((x >> 8) & 0x00FF00FFu);
    return acc + (t & 0xFFFFu) + (t >> 16);
#endif
}

/* Adds `delta` to the column histograms of the staged row `srow` (values outside the band,
 * the no-value mark included, have no histogram row). */
template <int W>
VMAF_DEVICE void cambi_hist_row(vmaf_u8 *hist, int pitch, int band_size, const vmaf_u16 *srow,
                                int cols, int delta)
{
    for (int k = threadIdx.x; k < cols; k += W) {
        const vmaf_u16 v = srow[k];
        if (v < band_size) {
            vmaf_u8 *b = hist + (v + CAMBI_SLIDE_GUARD) * pitch + k;
            *b = (vmaf_u8)(*b + delta);
        }
    }
}

/* vmaf_cambi_cvalues (same results) with the CPU's sliding histograms: a block takes
 * W output columns and `rows` output rows, stages the window values they need,
 * keeps for each column its windows cover the count of every band value in the current window
 * rows (one byte: at most the window side), and moves it down one row per output row; a
 * window count is then the sum of 2 * pad + 1 adjacent bytes, four at a time. `smem` holds
 * BYTES; the host checks the tables fit. */
template <int W, int BYTES>
VMAF_DEVICE void cambi_cvalues_slide(const vmaf_u16 *wv, int w, int h, int pad, int band_base,
                                     int band_size, int vlt, const vmaf_i32 *params,
                                     const float *lut, int rows, float *cv, vmaf_u64 *stats,
                                     vmaf_u32 *smem, CambiStats *st, int room)
{
    const int nd = CAMBI_SLIDE_ND;
    const int cols = W + 2 * pad;
    const int pitch = (cols + 6) & ~3; /* whole words, the last window's last word included */
    const int pw = pitch >> 2;
    const int hist_words = (band_size + 2 * CAMBI_SLIDE_GUARD) * pw;
    const int srows = rows + 2 * pad;
    VMAF_ASSUME(hist_words * 4 + srows * cols * 2 <= BYTES, "cambi sliding tables fit");
    VMAF_ASSUME(hist_words * 4 + srows * cols * 2 <= room, "cambi sliding tables fit the launch");
    vmaf_u8 *hist = (vmaf_u8 *)smem;
    vmaf_u16 *strip = (vmaf_u16 *)(smem + hist_words);
    const int x0 = blockIdx.x * W;
    const int y0 = blockIdx.y * rows;
    const int y1 = y0 + rows < h ? y0 + rows : h;
    const int tid = threadIdx.x;
    for (int k = tid; k < hist_words; k += W)
        smem[k] = 0;
    cambi_stats_zero(st);
    // Strip row s, column k: picture row y0 - pad + s, column x0 - pad + k. Rows in batches
    // of loads before their stores, so the global latency is paid once per batch.
#pragma unroll 4
    for (int s = 0; s < srows; s++) {
        const int r = y0 - pad + s;
        const bool inside = r >= 0 && r < h;
        const vmaf_u16 *src = wv + (vmaf_u64)(inside ? r : 0) * w;
        for (int k = tid; k < cols; k += W) {
            const int c = x0 - pad + k;
            strip[s * cols + k] = (inside && c >= 0 && c < w) ? src[c] : (vmaf_u16)CAMBI_NONE;
        }
    }
    // The thresholds and weights in registers.
    vmaf_i32 pr[2 * CAMBI_SLIDE_ND];
#pragma unroll
    for (int k = 0; k < 2 * CAMBI_SLIDE_ND; k++)
        pr[k] = params[k];
    __syncthreads();
    for (int s = 0; s < 2 * pad; s++)
        cambi_hist_row<W>(hist, pitch, band_size, strip + s * cols, cols, 1);
    // This thread's window covers bytes tid .. tid + side of a value's row: `words` words from
    // word tid / 4, the first and last partly.
    const int side = 2 * pad + 1;
    const int first = tid >> 2;
    const int words = ((tid & 3) + side + 3) >> 2;
    const vmaf_u32 head = 0xFFFFFFFFu << (8 * (tid & 3));
    const int end = (tid + side) & 3;
    const vmaf_u32 tail = end == 0 ? 0xFFFFFFFFu : (1u << (8 * end)) - 1u;
    const int col = x0 + tid;
    for (int y = y0; y < y1; y++) {
        const int s = y - y0;
        cambi_hist_row<W>(hist, pitch, band_size, strip + (s + 2 * pad) * cols, cols, 1);
        __syncthreads();
        const int center = strip[(s + pad) * cols + pad + tid];
        if (col < w) {
            float c_value = 0.0f;
            if (center < band_size) {
                const vmaf_u32 *base = smem + (center - nd + CAMBI_SLIDE_GUARD) * pw + first;
                vmaf_u32 counts[CAMBI_SLIDE_K];
#pragma unroll
                for (int k = 0; k < CAMBI_SLIDE_K; k++)
                    counts[k] = 0;
                for (int q = 0; q < words; q++) {
                    const vmaf_u32 m = (q == 0 ? head : 0xFFFFFFFFu) &
                                       (q == words - 1 ? tail : 0xFFFFFFFFu);
#pragma unroll
                    for (int k = 0; k < CAMBI_SLIDE_K; k++)
                        counts[k] = cambi_byte_sum(base[k * pw + q], m, counts[k]);
                }
                c_value = cambi_c_value(counts, nd, center + band_base + nd, vlt, pr, lut);
            }
            cv[(vmaf_u64)y * w + col] = c_value;
            cambi_stats_add(st, c_value);
        }
        __syncthreads();
        cambi_hist_row<W>(hist, pitch, band_size, strip + s * cols, cols, -1);
    }
    cambi_stats_flush(st, stats);
}

/* Launch with CAMBI_SLIDE_W x 1 blocks, grid (ceil(w / CAMBI_SLIDE_W), ceil(h / rows)); the
 * arguments are vmaf_cambi_cvalues's, nd must be CAMBI_SLIDE_ND. */
VMAF_KERNEL void vmaf_cambi_cvalues_slide(const vmaf_u16 *wv, int w, int h, int pad,
                                          int band_base, int band_size, int nd, int vlt,
                                          const vmaf_i32 *params, const float *lut, int rows,
                                          float *cv, vmaf_u64 *stats)
{
    __shared__ vmaf_u32 smem[CAMBI_SLIDE_BYTES / 4];
    __shared__ CambiStats st;
    VMAF_ASSUME(nd == CAMBI_SLIDE_ND, "cambi sliding contrast steps");
    (void)nd;
    cambi_cvalues_slide<CAMBI_SLIDE_W, CAMBI_SLIDE_BYTES>(wv, w, h, pad, band_base, band_size,
                                                          vlt, params, lut, rows, cv, stats,
                                                          smem, &st, CAMBI_SLIDE_BYTES);
}

/* The same with room for wider windows (fewer blocks fit a compute unit). */
VMAF_KERNEL void vmaf_cambi_cvalues_slide_big(const vmaf_u16 *wv, int w, int h, int pad,
                                              int band_base, int band_size, int nd, int vlt,
                                              const vmaf_i32 *params, const float *lut,
                                              int rows, float *cv, vmaf_u64 *stats)
{
    __shared__ vmaf_u32 smem[CAMBI_SLIDE_BIG_BYTES / 4];
    __shared__ CambiStats st;
    VMAF_ASSUME(nd == CAMBI_SLIDE_ND, "cambi sliding contrast steps");
    (void)nd;
    cambi_cvalues_slide<CAMBI_SLIDE_W, CAMBI_SLIDE_BIG_BYTES>(wv, w, h, pad, band_base,
                                                              band_size, vlt, params, lut, rows,
                                                              cv, stats, smem, &st,
                                                              CAMBI_SLIDE_BIG_BYTES);
}

/* The wide variant: launch with CAMBI_WIDE_W x 1 blocks, grid (ceil(w / CAMBI_WIDE_W),
 * ceil(h / rows)) and the tables' bytes (at most CAMBI_WIDE_BYTES) of dynamic shared memory. */
VMAF_KERNEL void VMAF_BOUNDS(CAMBI_WIDE_W, 2)
vmaf_cambi_cvalues_wide(const vmaf_u16 *wv, int w, int h, int pad, int band_base, int band_size,
                        int nd, int vlt, const vmaf_i32 *params, const float *lut, int rows,
                        float *cv, vmaf_u64 *stats)
{
    VMAF_DYNAMIC_SHARED(vmaf_u32, smem, CAMBI_WIDE_BYTES);
    __shared__ CambiStats st;
    VMAF_ASSUME(nd == CAMBI_SLIDE_ND, "cambi sliding contrast steps");
    (void)nd;
    cambi_cvalues_slide<CAMBI_WIDE_W, CAMBI_WIDE_BYTES>(
        wv, w, h, pad, band_base, band_size, vlt, params, lut, rows, cv, stats, smem, &st,
        VMAF_DYNAMIC_SHARED_BYTES(CAMBI_WIDE_BYTES));
}
