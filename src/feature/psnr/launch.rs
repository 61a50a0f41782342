//! Launchers for kernels/psnr.hip.

use crate::error::{Error, Result};
use crate::gpu::launch::{DevicePlane, Launch, Sample, Span, MAX_ROW_BLOCKS, ROW_BLOCK};
use crate::gpu::{DeviceBuffer, GpuState, LaunchConfig};

/// `vmaf_psnr_sse_{u8,u16}(ref, dis, w, h, ref_stride, dis_stride, out)`.
type SseArgs<'a, T> = (Span<'a, T>, Span<'a, T>, u32, u32, u32, u32, Span<'a, u64>);

const SSE_U8: &str = "vmaf_psnr_sse_u8";
const SSE_U16: &str = "vmaf_psnr_sse_u16";

/// The kernels of kernels/psnr.hip with the argument tuples their launchers pass.
#[cfg(test)]
pub(crate) fn signatures() -> Vec<crate::gpu::launch::Signature> {
    use crate::gpu::launch::sig;
    vec![sig::<SseArgs<u8>>(SSE_U8), sig::<SseArgs<u16>>(SSE_U16)]
}

/// `out[out_index] += sum over the plane of (ref - dis)^2`.
pub fn psnr_sse<'a, T: Sample>(
    state: &GpuState,
    reference: DevicePlane<'a, T>,
    distorted: DevicePlane<'a, T>,
    out: &'a DeviceBuffer<u64>,
    out_index: usize,
) -> Result<Launch<'a>> {
    if (reference.w, reference.h) != (distorted.w, distorted.h) {
        return Err(Error::inval(
            "reference and distorted planes differ in size",
        ));
    }
    let r = reference.span()?;
    let d = distorted.span()?;
    if out_index >= out.len() {
        return Err(Error::inval("PSNR output index out of range"));
    }
    let o = Span::of(out, out_index, 1)?;
    let w = u32::try_from(reference.w).map_err(|_| Error::inval("plane too wide"))?;
    let h = u32::try_from(reference.h).map_err(|_| Error::inval("plane too tall"))?;
    let (rs, ds) = (reference.stride as u32, distorted.stride as u32);
    let cfg = LaunchConfig {
        grid: (w.div_ceil(ROW_BLOCK), h.min(MAX_ROW_BLOCKS), 1),
        block: (ROW_BLOCK, 1, 1),
        shared_mem_bytes: 0,
    };
    // Reads rows < h, columns < w of both planes; adds to `out[out_index]` alone.
    Launch::new::<SseArgs<T>>(
        state,
        "psnr",
        T::pick(SSE_U8, SSE_U16),
        cfg,
        (r, d, w, h, rs, ds, o),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::PinnedHostBuffer;

    fn lcg(seed: &mut u64) -> u32 {
        *seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (*seed >> 33) as u32
    }

    fn cpu_sse<T: Copy + Into<i64>>(
        r: &[T],
        d: &[T],
        w: usize,
        h: usize,
        rs: usize,
        ds: usize,
    ) -> u64 {
        let mut s = 0u64;
        for y in 0..h {
            for x in 0..w {
                let e = r[y * rs + x].into() - d[y * ds + x].into();
                s += (e * e) as u64;
            }
        }
        s
    }

    /// The PSNR kernel on odd sizes, different strides and an offset plane, 8 and 16 bits,
    /// including the 16-bit extreme (every difference 65535).
    #[test]
    fn psnr_kernel_matches_cpu() {
        let Some(state) = crate::gpu::test_state() else {
            return;
        };
        let dev = state.device();
        let stream = state.stream();
        let mut seed = 42u64;
        let sums = DeviceBuffer::<u64>::new(dev, 4).unwrap();
        let mut host_sums = PinnedHostBuffer::<u64>::new(dev, 4).unwrap();
        for &(w, h) in &[(1usize, 1usize), (33, 7), (1921, 1081), (4000, 3)] {
            let (rs, ds, off) = (w + 5, w + 64, 17);
            // 8-bit, random.
            let r8: Vec<u8> = (0..off + rs * h).map(|_| lcg(&mut seed) as u8).collect();
            let d8: Vec<u8> = (0..ds * h).map(|_| lcg(&mut seed) as u8).collect();
            // 16-bit: plane 2 uses the extreme 0 vs 65535.
            let r16: Vec<u16> = (0..rs * h).map(|_| lcg(&mut seed) as u16 & 0x3ff).collect();
            let d16: Vec<u16> = (0..ds * h).map(|_| lcg(&mut seed) as u16 & 0x3ff).collect();
            let zeros = vec![0u16; rs * h];
            let maxed = vec![u16::MAX; ds * h];

            let mut rd8 = DeviceBuffer::<u8>::new(dev, r8.len()).unwrap();
            let mut dd8 = DeviceBuffer::<u8>::new(dev, d8.len()).unwrap();
            rd8.upload_blocking(stream, &r8).unwrap();
            dd8.upload_blocking(stream, &d8).unwrap();
            let mut rd16 = DeviceBuffer::<u16>::new(dev, rs * h).unwrap();
            let mut dd16 = DeviceBuffer::<u16>::new(dev, ds * h).unwrap();
            let mut zd = DeviceBuffer::<u16>::new(dev, rs * h).unwrap();
            let mut md = DeviceBuffer::<u16>::new(dev, ds * h).unwrap();
            rd16.upload_blocking(stream, &r16).unwrap();
            dd16.upload_blocking(stream, &d16).unwrap();
            zd.upload_blocking(stream, &zeros).unwrap();
            md.upload_blocking(stream, &maxed).unwrap();

            sums.zero(stream).unwrap();
            let p8 = |buf, offset, stride| DevicePlane::<u8> {
                buf,
                offset,
                w,
                h,
                stride,
            };
            let p16 = |buf, offset, stride| DevicePlane::<u16> {
                buf,
                offset,
                w,
                h,
                stride,
            };
            psnr_sse(&state, p8(&rd8, off, rs), p8(&dd8, 0, ds), &sums, 0)
                .unwrap()
                .queue(stream)
                .unwrap();
            psnr_sse(&state, p16(&rd16, 0, rs), p16(&dd16, 0, ds), &sums, 1)
                .unwrap()
                .queue(stream)
                .unwrap();
            psnr_sse(&state, p16(&zd, 0, rs), p16(&md, 0, ds), &sums, 2)
                .unwrap()
                .queue(stream)
                .unwrap();
            sums.download_async(stream, &mut host_sums, 4).unwrap();
            let got = host_sums.as_slice().unwrap();
            assert_eq!(
                got[0],
                cpu_sse(&r8[off..], &d8, w, h, rs, ds),
                "8-bit {w}x{h}"
            );
            assert_eq!(got[1], cpu_sse(&r16, &d16, w, h, rs, ds), "16-bit {w}x{h}");
            assert_eq!(got[2], (w * h) as u64 * 65535 * 65535, "extreme {w}x{h}");
            assert_eq!(got[3], 0);

            // A plane whose last row ends one sample past its buffer is refused before launch
            // (the last row needs only `w` of its `rs` samples).
            let too_far = DevicePlane {
                buf: &rd8,
                offset: off + (rs - w) + 1,
                w,
                h,
                stride: rs,
            };
            assert!(psnr_sse(&state, too_far, p8(&dd8, 0, ds), &sums, 0).is_err());
            assert!(psnr_sse(&state, p8(&rd8, 0, rs), p8(&dd8, 0, ds), &sums, 4).is_err());
        }
    }
}
