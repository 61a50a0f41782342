/* Pictures in device memory. Without an NVIDIA GPU: the argument checks of libvmaf_cuda.h and of
 * the DEVICE method (-EINVAL, -ENODEV). With one: frames are filled on the GPU the way FFmpeg's
 * libvmaf_cuda filter fills them (a pitched "decoded" frame in device memory, copied into the
 * fetched picture with cuMemcpy2D under the caller's own CUcontext), through upstream's CUDA API
 * with a caller context and with the primary context, through libvmaf_hip.h's DEVICE pool, and
 * as pitched frames handed over in place (vmaf_hip_picture_wrap_device, reference and distorted
 * pitches equal and differing), as semi-planar decoder frames (NV12 at 8 bits, P010 at 10) in a
 * caller's own CUcontext (vmaf_hip_state_init_cuda + vmaf_hip_picture_wrap_device_semiplanar,
 * FFmpeg's way with NVDEC frames) and in host memory (vmaf_hip_picture_wrap_semiplanar), with 0
 * and 2 worker threads, 8- and 10-bit. The model, PSNR
 * (read on the GPU in place) and CIEDE (a CPU extractor, which reads host copies of all three
 * planes) must equal a CPU run over the same frames in host pictures, bit for bit. */
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <libvmaf/libvmaf.h>
#include <libvmaf/libvmaf_cuda.h>
#include "libvmaf_hip.h"

#include "check.h"

/* Size and length; VMAF_TEST_DEVICE_SIZE=WxH and VMAF_TEST_DEVICE_FRAMES=N override them (large
 * frames make the copies slow enough to expose a missing ordering). */
static unsigned W = 176, H = 144, FRAMES = 24;
#define PITCH_PAD 40
/* Extra row bytes of HIP_WRAP's distorted frames on odd frames. */
#define WRAP_EXTRA 64
#define N_SCORES 8

static const char *feature_names[N_SCORES - 1] = {
    "VMAF_integer_feature_adm2_score", "VMAF_integer_feature_vif_scale0_score",
    "VMAF_integer_feature_motion2_score", "psnr_y", "psnr_cb", "psnr_cr", "ciede2000"};

/* The CUDA driver calls a decoder would make (loaded here, not linked). */
typedef unsigned long long CUdeviceptr_t;
typedef struct {
    size_t srcXInBytes, srcY;
    int srcMemoryType;
    const void *srcHost;
    CUdeviceptr_t srcDevice;
    void *srcArray;
    size_t srcPitch;
    size_t dstXInBytes, dstY;
    int dstMemoryType;
    void *dstHost;
    CUdeviceptr_t dstDevice;
    void *dstArray;
    size_t dstPitch;
    size_t WidthInBytes, Height;
} Memcpy2D;
#define MEMORYTYPE_HOST 1
#define MEMORYTYPE_DEVICE 2

static struct {
    int (*init)(unsigned);
    int (*device_get)(int *, int);
    int (*ctx_create)(void **, unsigned, int);
    int (*ctx_destroy)(void *);
    int (*ctx_push)(void *);
    int (*ctx_pop)(void **);
    int (*primary_retain)(void **, int);
    int (*primary_release)(int);
    int (*mem_alloc)(CUdeviceptr_t *, size_t);
    int (*mem_free)(CUdeviceptr_t);
    int (*memcpy2d)(const Memcpy2D *);
} cu;

static int load_cuda(void)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return -1;
#define SYM(field, name) if (!(*(void **)&cu.field = dlsym(lib, name))) return -1
    SYM(init, "cuInit");
    SYM(device_get, "cuDeviceGet");
    SYM(ctx_create, "cuCtxCreate_v2");
    SYM(ctx_destroy, "cuCtxDestroy_v2");
    SYM(ctx_push, "cuCtxPushCurrent_v2");
    SYM(ctx_pop, "cuCtxPopCurrent_v2");
    SYM(primary_retain, "cuDevicePrimaryCtxRetain");
    SYM(primary_release, "cuDevicePrimaryCtxRelease_v2");
    SYM(mem_alloc, "cuMemAlloc_v2");
    SYM(mem_free, "cuMemFree_v2");
    SYM(memcpy2d, "cuMemcpy2D_v2");
#undef SYM
    return cu.init(0) == 0 ? 0 : -1;
}

static void on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "test_device: timed out\n";
    if (write(2, msg, sizeof(msg) - 1) < 0) _exit(3);
    _exit(2);
}

static unsigned sample(unsigned x, unsigned y, unsigned i, int p, int dist, unsigned bpc)
{
    unsigned v = 16 + ((x + i) * 2 + y * 3 + ((((x + i) >> 3) ^ (y >> 3)) & 3) * 40 + p * 50) % 220;
    if (dist) v = v / 24 * 24 + (x * 7 + y * 13 + i + p) % 5;
    return v << (bpc - 8);
}

/* Writes frame `i` into plane rows of `pitch` bytes at `mem` (host memory). */
static void render(unsigned char *mem, const unsigned *pw, const unsigned *ph, size_t pitch,
                   unsigned i, int dist, unsigned bpc, size_t *plane_off)
{
    size_t off = 0;
    for (int p = 0; p < 3; p++) {
        plane_off[p] = off;
        for (unsigned y = 0; y < ph[p]; y++)
            for (unsigned x = 0; x < pw[p]; x++) {
                unsigned v = sample(x, y, i, p, dist, bpc);
                unsigned char *at = mem + off + y * pitch;
                if (bpc == 8)
                    at[x] = (unsigned char)v;
                else
                    ((uint16_t *)at)[x] = (uint16_t)v;
            }
        off += ph[p] * pitch;
    }
}

enum mode { HOST_ALLOC, CUDA_OWN_CTX, CUDA_PRIMARY, HIP_DEVICE, HIP_WRAP, HIP_SEMIPLANAR,
            HOST_SEMIPLANAR };
static const char *mode_name[] = {"host", "cuda api, caller context", "cuda api, primary context",
                                  "hip DEVICE pool", "hip wrapped device frames",
                                  "hip semi-planar device frames, caller context",
                                  "hip semi-planar host frames"};

/* A decoded frame handed over in place (HIP_WRAP, the semi-planar modes): freed by the test
 * once released. */
struct wrapped {
    CUdeviceptr_t mem;
    unsigned char *host;
    int released;
};

/* Frame `i` as a semi-planar decoder writes it into rows of `pitch` bytes at `mem`: the luma,
 * then (at *chroma_off) the (Cb, Cr) pairs; P010 keeps 10-bit samples in the high bits. */
static void render_semiplanar(unsigned char *mem, size_t pitch, unsigned i, int dist,
                              unsigned bpc, size_t *chroma_off)
{
    const unsigned shift = bpc == 8 ? 0 : 16 - bpc;
    *chroma_off = H * pitch;
    for (unsigned y = 0; y < H; y++)
        for (unsigned x = 0; x < W; x++) {
            unsigned v = sample(x, y, i, 0, dist, bpc);
            if (bpc == 8)
                mem[y * pitch + x] = (unsigned char)v;
            else
                ((uint16_t *)(mem + y * pitch))[x] = (uint16_t)(v << shift);
        }
    for (unsigned y = 0; y < H / 2; y++)
        for (unsigned x = 0; x < W / 2; x++)
            for (int p = 1; p < 3; p++) {
                unsigned v = sample(x, y, i, p, dist, bpc);
                unsigned char *row = mem + *chroma_off + y * pitch;
                if (bpc == 8)
                    row[2 * x + p - 1] = (unsigned char)v;
                else
                    ((uint16_t *)row)[2 * x + p - 1] = (uint16_t)(v << shift);
            }
}

static void on_release(void *opaque)
{
    __atomic_add_fetch(&((struct wrapped *)opaque)->released, 1, __ATOMIC_SEQ_CST);
}

/* A "decoder": the frame in device memory with padded rows, as NVDEC hands it out. */
struct decoded {
    CUdeviceptr_t mem;
    size_t pitch, off[3];
};

static int run(enum mode mode, unsigned bpc, unsigned n_threads, VmafModel *model, double *out)
{
    const unsigned pw[3] = {W, W / 2, W / 2}, ph[3] = {H, H / 2, H / 2};
    const size_t bps = bpc > 8 ? 2 : 1;
    VmafConfiguration cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.log_level = VMAF_LOG_LEVEL_WARNING;
    cfg.n_threads = n_threads;
    VmafContext *vmaf = NULL;
    if (vmaf_init(&vmaf, cfg)) return -1;
    int rc = 0;
    void *own_ctx = NULL, *cur = NULL;
    VmafCudaState *cu_state = NULL;
    VmafHipState *hip = NULL;
    struct decoded dec = {0};
    if (mode == CUDA_OWN_CTX || mode == HIP_SEMIPLANAR) {
        int dev;
        if (cu.device_get(&dev, 0) || cu.ctx_create(&own_ctx, 0, dev)) return -1;
        cu.ctx_pop(&cur);
    }
    if (mode == CUDA_OWN_CTX || mode == CUDA_PRIMARY) {
        VmafCudaConfiguration cc = {.cu_ctx = own_ctx};
        rc = vmaf_cuda_state_init(&cu_state, cc);
        if (!rc) rc = vmaf_cuda_import_state(vmaf, cu_state);
    } else if (mode == HIP_DEVICE || mode == HIP_WRAP) {
        VmafHipConfiguration hc = {.device_index = -1, .flags = 0};
        rc = vmaf_hip_state_init(&hip, hc);
        if (!rc) rc = vmaf_hip_import_state(vmaf, hip);
    } else if (mode == HIP_SEMIPLANAR) {
        /* device 0's context, on device 0: accepted; -EXDEV for another index is checked in
         * argument_checks() where a second GPU exists */
        VmafHipConfiguration hc = {.device_index = -1, .flags = 0};
        rc = vmaf_hip_state_init_cuda(&hip, hc, own_ctx);
        if (!rc) rc = vmaf_hip_import_state(vmaf, hip);
    }
    if (!rc) rc = vmaf_use_features_from_model(vmaf, model);
    if (!rc) rc = vmaf_use_feature(vmaf, "psnr", NULL);
    if (!rc) rc = vmaf_use_feature(vmaf, "ciede", NULL);
    if (!rc && (mode == CUDA_OWN_CTX || mode == CUDA_PRIMARY)) {
        VmafCudaPictureConfiguration pc = {
            .pic_params = {.w = W, .h = H, .bpc = bpc, .pix_fmt = VMAF_PIX_FMT_YUV420P},
            .pic_prealloc_method = VMAF_CUDA_PICTURE_PREALLOCATION_METHOD_DEVICE};
        rc = vmaf_cuda_preallocate_pictures(vmaf, pc);
    } else if (!rc && mode == HIP_DEVICE) {
        VmafHipPictureConfiguration pc;
        memset(&pc, 0, sizeof(pc));
        pc.pic_params.w = W;
        pc.pic_params.h = H;
        pc.pic_params.bpc = bpc;
        pc.pic_params.pix_fmt = VMAF_PIX_FMT_YUV420P;
        pc.pic_prealloc_method = VMAF_HIP_PICTURE_PREALLOCATION_METHOD_DEVICE;
        rc = vmaf_hip_preallocate_pictures(vmaf, pc);
    }
    /* The decoder's context: the caller's own, or the primary one. */
    void *dec_ctx = own_ctx;
    int primary_dev = -1;
    if (!rc && mode != HOST_ALLOC && mode != HOST_SEMIPLANAR && !dec_ctx) {
        if (cu.device_get(&primary_dev, 0) || cu.primary_retain(&dec_ctx, primary_dev)) rc = -1;
    }
    dec.pitch = W * bps + PITCH_PAD;
    /* HIP_WRAP's longer rows (WRAP_EXTRA) fit too. */
    size_t host_len = (dec.pitch + WRAP_EXTRA) * (H + H);
    unsigned char *host = calloc(1, host_len);
    if (!host) rc = -1;
    if (!rc && mode != HOST_ALLOC && mode != HOST_SEMIPLANAR) {
        cu.ctx_push(dec_ctx);
        if (cu.mem_alloc(&dec.mem, host_len)) rc = -1;
        cu.ctx_pop(&cur);
    }
    struct wrapped *wraps = calloc(2 * FRAMES, sizeof(*wraps));
    if (!wraps) rc = -1;
    VmafPicture ref, dis;
    memset(&ref, 0, sizeof(ref));
    memset(&dis, 0, sizeof(dis));
    for (unsigned i = 0; !rc && i < 2 * FRAMES; i++) {
        unsigned frame = i / 2;
        int dist = i % 2;
        VmafPicture *pic = dist ? &dis : &ref;
        /* HIP_WRAP: on odd frames the distorted frame's rows are longer than the reference's
         * (pictures of differing pitch), else both share the decoder's pitch. */
        size_t pitch = dec.pitch + (mode == HIP_WRAP && dist && frame % 2 ? WRAP_EXTRA : 0);
        if (mode == HIP_SEMIPLANAR || mode == HOST_SEMIPLANAR) {
            struct wrapped *wr = &wraps[i];
            size_t chroma_off;
            const size_t len = pitch * (H + H / 2);
            unsigned char *frame_mem = host;
            if (mode == HOST_SEMIPLANAR) {
                /* freed by the test after the context closed */
                if (!(wr->host = calloc(1, len))) {
                    rc = -1;
                    break;
                }
                frame_mem = wr->host;
            }
            render_semiplanar(frame_mem, pitch, frame, dist, bpc, &chroma_off);
            const enum VmafHipSemiPlanarFormat fmt =
                bpc == 8 ? VMAF_HIP_SEMIPLANAR_NV12 : VMAF_HIP_SEMIPLANAR_P010;
            const ptrdiff_t stride[2] = {(ptrdiff_t)pitch, (ptrdiff_t)pitch};
            int err;
            if (mode == HIP_SEMIPLANAR) {
                cu.ctx_push(dec_ctx);
                if (cu.mem_alloc(&wr->mem, len)) rc = -1;
                Memcpy2D up = {.srcMemoryType = MEMORYTYPE_HOST, .srcHost = host,
                               .srcPitch = pitch, .dstMemoryType = MEMORYTYPE_DEVICE,
                               .dstDevice = wr->mem, .dstPitch = pitch, .WidthInBytes = pitch,
                               .Height = H + H / 2};
                if (!rc && cu.memcpy2d(&up)) rc = -1;
                cu.ctx_pop(&cur);
                void *data[2] = {(void *)(uintptr_t)wr->mem,
                                 (void *)(uintptr_t)(wr->mem + chroma_off)};
                err = rc ? -1
                         : vmaf_hip_picture_wrap_device_semiplanar(vmaf, pic, fmt, W, H, data,
                                                                   stride, on_release, wr);
            } else {
                void *data[2] = {wr->host, wr->host + chroma_off};
                err = vmaf_hip_picture_wrap_semiplanar(pic, fmt, W, H, data, stride, on_release,
                                                       wr);
            }
            if (err) {
                rc = -1;
                break;
            }
        } else {
            render(host, pw, ph, pitch, frame, dist, bpc, dec.off);
        }
        if (mode == HIP_SEMIPLANAR || mode == HOST_SEMIPLANAR) {
            /* wrapped above */
        } else if (mode == HIP_WRAP) {
            struct wrapped *wr = &wraps[i];
            cu.ctx_push(dec_ctx);
            if (cu.mem_alloc(&wr->mem, pitch * 2 * H)) rc = -1;
            Memcpy2D up = {.srcMemoryType = MEMORYTYPE_HOST, .srcHost = host, .srcPitch = pitch,
                           .dstMemoryType = MEMORYTYPE_DEVICE, .dstDevice = wr->mem,
                           .dstPitch = pitch, .WidthInBytes = pitch, .Height = 2 * H};
            if (!rc && cu.memcpy2d(&up)) rc = -1;
            cu.ctx_pop(&cur);
            void *data[3];
            ptrdiff_t stride[3];
            for (int p = 0; p < 3; p++) {
                data[p] = (void *)(uintptr_t)(wr->mem + dec.off[p]);
                stride[p] = (ptrdiff_t)pitch;
            }
            if (rc || vmaf_hip_picture_wrap_device(vmaf, pic, VMAF_PIX_FMT_YUV420P, bpc, W, H,
                                                   data, stride, on_release, wr)) {
                rc = -1;
                break;
            }
        } else if (mode == HOST_ALLOC) {
            if (vmaf_picture_alloc(pic, VMAF_PIX_FMT_YUV420P, bpc, W, H)) {
                rc = -1;
                break;
            }
            for (int p = 0; p < 3; p++)
                for (unsigned y = 0; y < ph[p]; y++)
                    memcpy((unsigned char *)pic->data[p] + y * pic->stride[p],
                           host + dec.off[p] + y * dec.pitch, pw[p] * bps);
        } else {
            int err = mode == HIP_DEVICE ? vmaf_hip_fetch_preallocated_picture(vmaf, pic)
                                         : vmaf_cuda_fetch_preallocated_picture(vmaf, pic);
            if (err) {
                rc = -1;
                break;
            }
            cu.ctx_push(dec_ctx);
            Memcpy2D up = {.srcMemoryType = MEMORYTYPE_HOST, .srcHost = host, .srcPitch = dec.pitch,
                           .dstMemoryType = MEMORYTYPE_DEVICE, .dstDevice = dec.mem,
                           .dstPitch = dec.pitch, .WidthInBytes = dec.pitch, .Height = 2 * H};
            if (cu.memcpy2d(&up)) rc = -1;
            for (int p = 0; !rc && p < 3; p++) {
                Memcpy2D m = {.srcMemoryType = MEMORYTYPE_DEVICE, .srcDevice = dec.mem + dec.off[p],
                              .srcPitch = dec.pitch, .dstMemoryType = MEMORYTYPE_DEVICE,
                              .dstDevice = (CUdeviceptr_t)(uintptr_t)pic->data[p],
                              .dstPitch = (size_t)pic->stride[p], .WidthInBytes = pw[p] * bps,
                              .Height = ph[p]};
                if (cu.memcpy2d(&m)) rc = -1;
            }
            cu.ctx_pop(&cur);
            if (rc) break;
        }
        if (dist && vmaf_read_pictures(vmaf, &ref, &dis, frame)) rc = -1;
    }
    if (!rc && vmaf_read_pictures(vmaf, NULL, NULL, 0)) rc = -1;
    for (unsigned i = 0; !rc && i < FRAMES; i++) {
        if (vmaf_score_at_index(vmaf, model, &out[i * N_SCORES], i)) rc = -1;
        for (int f = 0; !rc && f < N_SCORES - 1; f++)
            if (vmaf_feature_score_at_index(vmaf, feature_names[f], &out[i * N_SCORES + 1 + f], i))
                rc = -1;
    }
    if (vmaf_close(vmaf)) rc = -1;
    vmaf_hip_state_free(&hip);
    for (unsigned i = 0; wraps && i < 2 * FRAMES; i++) {
        free(wraps[i].host);
        if (!wraps[i].mem && !wraps[i].host) continue;
        /* Every wrapped frame was released exactly once by the time the context closed. */
        if (__atomic_load_n(&wraps[i].released, __ATOMIC_SEQ_CST) != 1) {
            fprintf(stderr, "  wrapped picture %u released %d times\n", i, wraps[i].released);
            rc = -1;
        }
        if (!wraps[i].mem) continue;
        cu.ctx_push(dec_ctx);
        cu.mem_free(wraps[i].mem);
        cu.ctx_pop(&cur);
    }
    free(wraps);
    if (dec.mem) {
        cu.ctx_push(dec_ctx);
        cu.mem_free(dec.mem);
        cu.ctx_pop(&cur);
    }
    if (primary_dev >= 0) cu.primary_release(primary_dev);
    /* Our contexts are closed: the caller's context may go (FFmpeg's order). */
    if (own_ctx) cu.ctx_destroy(own_ctx);
    free(host);
    return rc;
}

static void argument_checks(int have_gpu)
{
    VmafCudaConfiguration cc = {.cu_ctx = NULL};
    CHECK(vmaf_cuda_state_init(NULL, cc) == -EINVAL);
    CHECK(vmaf_cuda_import_state(NULL, NULL) == -EINVAL);
    VmafCudaPictureConfiguration pc = {
        .pic_params = {.w = W, .h = H, .bpc = 8, .pix_fmt = VMAF_PIX_FMT_YUV420P},
        .pic_prealloc_method = VMAF_CUDA_PICTURE_PREALLOCATION_METHOD_DEVICE};
    CHECK(vmaf_cuda_preallocate_pictures(NULL, pc) == -EINVAL);
    CHECK(vmaf_cuda_fetch_preallocated_picture(NULL, NULL) == -EINVAL);

    VmafConfiguration cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.log_level = VMAF_LOG_LEVEL_NONE;
    VmafContext *vmaf = NULL;
    CHECK(vmaf_init(&vmaf, cfg) == 0);
    /* DEVICE and HOST_PINNED need an imported state; unknown methods are refused. */
    CHECK(vmaf_cuda_preallocate_pictures(vmaf, pc) == -EINVAL);
    pc.pic_prealloc_method = VMAF_CUDA_PICTURE_PREALLOCATION_METHOD_HOST_PINNED;
    CHECK(vmaf_cuda_preallocate_pictures(vmaf, pc) == -EINVAL);
    pc.pic_prealloc_method = (enum VmafCudaPicturePreallocationMethod)7;
    CHECK(vmaf_cuda_preallocate_pictures(vmaf, pc) == -EINVAL);
    VmafPicture pic;
    memset(&pic, 0, sizeof(pic));
    CHECK(vmaf_cuda_fetch_preallocated_picture(vmaf, &pic) == -EINVAL);
    VmafHipPictureConfiguration hpc;
    memset(&hpc, 0, sizeof(hpc));
    hpc.pic_params.w = W;
    hpc.pic_params.h = H;
    hpc.pic_params.bpc = 8;
    hpc.pic_params.pix_fmt = VMAF_PIX_FMT_YUV420P;
    hpc.pic_prealloc_method = VMAF_HIP_PICTURE_PREALLOCATION_METHOD_DEVICE;
    CHECK(vmaf_hip_preallocate_pictures(vmaf, hpc) == -EINVAL);
    /* Wrapping device frames needs an imported state; refusals release nothing. */
    struct wrapped never = {0};
    unsigned char fake[64];
    void *data[3] = {fake, fake, fake};
    ptrdiff_t stride[3] = {W, W / 2, W / 2};
    memset(&pic, 0x5a, sizeof(pic)); /* a refusal must leave it empty */
    CHECK(vmaf_hip_picture_wrap_device(vmaf, &pic, VMAF_PIX_FMT_YUV420P, 8, W, H, data, stride,
                                       on_release, &never) == -EINVAL);
    CHECK(pic.ref == NULL && pic.data[0] == NULL && pic.w[0] == 0);
    CHECK(vmaf_hip_picture_wrap_device(NULL, &pic, VMAF_PIX_FMT_YUV420P, 8, W, H, data, stride,
                                       on_release, &never) == -EINVAL);
    CHECK(vmaf_hip_picture_wrap_device(vmaf, NULL, VMAF_PIX_FMT_YUV420P, 8, W, H, data, stride,
                                       on_release, &never) == -EINVAL);
    CHECK(never.released == 0);
    /* The semi-planar calls: the same refusals, and unknown layouts, odd strides for 16-bit
     * words, NULL planes. */
    const ptrdiff_t sp_stride[2] = {W, W}, odd_stride[2] = {2 * W + 1, 2 * W};
    void *sp_data[2] = {fake, fake}, *sp_null[2] = {fake, NULL};
    CHECK(vmaf_hip_picture_wrap_device_semiplanar(vmaf, &pic, VMAF_HIP_SEMIPLANAR_NV12, W, H,
                                                  sp_data, sp_stride, on_release,
                                                  &never) == -EINVAL);
    CHECK(pic.ref == NULL && pic.data[0] == NULL);
    CHECK(vmaf_hip_picture_wrap_semiplanar(&pic, (enum VmafHipSemiPlanarFormat)0, W, H, sp_data,
                                           sp_stride, on_release, &never) == -EINVAL);
    CHECK(vmaf_hip_picture_wrap_semiplanar(&pic, VMAF_HIP_SEMIPLANAR_P010, W, H, sp_data,
                                           odd_stride, on_release, &never) == -EINVAL);
    CHECK(vmaf_hip_picture_wrap_semiplanar(&pic, VMAF_HIP_SEMIPLANAR_NV12, W, H, sp_null,
                                           sp_stride, on_release, &never) == -EINVAL);
    CHECK(vmaf_hip_picture_wrap_semiplanar(NULL, VMAF_HIP_SEMIPLANAR_NV12, W, H, sp_data,
                                           sp_stride, on_release, &never) == -EINVAL);
    CHECK(pic.ref == NULL && never.released == 0);
    VmafHipState *hs = (VmafHipState *)&cfg;
    VmafHipConfiguration hc = {.device_index = -1, .flags = 0};
    CHECK(vmaf_hip_state_init_cuda(NULL, hc, fake) == -EINVAL);
    CHECK(vmaf_hip_state_init_cuda(&hs, hc, NULL) == -EINVAL && hs == NULL);
    hc.flags = 1;
    CHECK(vmaf_hip_state_init_cuda(&hs, hc, fake) == -EINVAL && hs == NULL);
    if (have_gpu) {
        /* A context of device 0 for device 1: -EXDEV, whether or not a device 1 exists. */
        void *ctx = NULL, *cur = NULL;
        int dev;
        CHECK(cu.device_get(&dev, 0) == 0 && cu.ctx_create(&ctx, 0, dev) == 0);
        cu.ctx_pop(&cur);
        hc.flags = 0;
        hc.device_index = 1;
        CHECK(vmaf_hip_state_init_cuda(&hs, hc, ctx) == -EXDEV && hs == NULL);
        hc.device_index = 0;
        CHECK(vmaf_hip_state_init_cuda(&hs, hc, ctx) == 0 && hs != NULL);
        vmaf_hip_state_free(&hs);
        CHECK(hs == NULL);
        cu.ctx_destroy(ctx);
    }
    /* HOST works without a GPU, as upstream's. */
    pc.pic_prealloc_method = VMAF_CUDA_PICTURE_PREALLOCATION_METHOD_HOST;
    CHECK(vmaf_cuda_preallocate_pictures(vmaf, pc) == 0);
    CHECK(vmaf_cuda_fetch_preallocated_picture(vmaf, &pic) == 0);
    CHECK(pic.w[0] == W && pic.h[1] == H / 2 && pic.data[0] != NULL);
    CHECK(vmaf_picture_unref(&pic) == 0);
    CHECK(vmaf_close(vmaf) == 0);

    VmafCudaState *st = (VmafCudaState *)&cfg;
    int rc = vmaf_cuda_state_init(&st, cc);
    if (have_gpu) {
        CHECK(rc == 0 && st != NULL);
        /* A device picture's planes cannot be moved by the caller. */
        CHECK(vmaf_init(&vmaf, cfg) == 0);
        CHECK(vmaf_cuda_import_state(vmaf, st) == 0);
        pc.pic_prealloc_method = VMAF_CUDA_PICTURE_PREALLOCATION_METHOD_DEVICE;
        pc.pic_params.w = 0;
        CHECK(vmaf_cuda_preallocate_pictures(vmaf, pc) == -EINVAL);
        pc.pic_params.w = W;
        pc.pic_params.bpc = 17;
        CHECK(vmaf_cuda_preallocate_pictures(vmaf, pc) == -EINVAL);
        pc.pic_params.bpc = 8;
        CHECK(vmaf_cuda_preallocate_pictures(vmaf, pc) == 0);
        VmafPicture a, b;
        CHECK(vmaf_cuda_fetch_preallocated_picture(vmaf, &a) == 0);
        CHECK(vmaf_cuda_fetch_preallocated_picture(vmaf, &b) == 0);
        CHECK(a.stride[0] == W && a.stride[1] == W / 2 && a.data[0] != b.data[0]);
        a.data[0] = (char *)a.data[0] + 1;
        CHECK(vmaf_read_pictures(vmaf, &a, &b, 0) == -EINVAL);
        /* Taken over (and released) even so, as for host pictures. */
        CHECK(a.ref == NULL && b.ref == NULL);
        /* Wrapped device frames: bad arguments are refused without a release; a good one is
         * released once, at its unref. Plane memory here is a DEVICE pool picture's. */
        CHECK(vmaf_cuda_fetch_preallocated_picture(vmaf, &b) == 0);
        void *dd[3] = {b.data[0], b.data[1], b.data[2]};
        ptrdiff_t ds[3] = {b.stride[0], b.stride[1], b.stride[2]};
        ds[1] = W / 2 - 1;
        CHECK(vmaf_hip_picture_wrap_device(vmaf, &a, VMAF_PIX_FMT_YUV420P, 8, W, H, dd, ds,
                                           on_release, &never) == -EINVAL);
        ds[1] = W / 2;
        dd[2] = NULL;
        CHECK(vmaf_hip_picture_wrap_device(vmaf, &a, VMAF_PIX_FMT_YUV420P, 8, W, H, dd, ds,
                                           on_release, &never) == -EINVAL);
        dd[2] = b.data[2];
        /* Host memory, or planes running past their allocation: refused before any kernel
         * could fault the context on them. */
        dd[1] = fake;
        CHECK(vmaf_hip_picture_wrap_device(vmaf, &a, VMAF_PIX_FMT_YUV420P, 8, W, H, dd, ds,
                                           on_release, &never) == -EINVAL);
        dd[1] = b.data[1];
        ds[1] = W / 2 + 8;
        CHECK(vmaf_hip_picture_wrap_device(vmaf, &a, VMAF_PIX_FMT_YUV420P, 8, W, H, dd, ds,
                                           on_release, &never) == -EINVAL);
        ds[1] = W / 2;
        /* Memory of another CUDA context on the same GPU: not mapped in the state's context,
         * so a kernel would fault on it. */
        {
            void *other = NULL, *popped = NULL;
            CUdeviceptr_t mem = 0;
            int dev;
            CHECK(cu.device_get(&dev, 0) == 0 && cu.ctx_create(&other, 0, dev) == 0);
            CHECK(cu.mem_alloc(&mem, (size_t)W * H) == 0);
            cu.ctx_pop(&popped);
            void *od[3] = {(void *)(uintptr_t)mem, dd[1], dd[2]};
            CHECK(vmaf_hip_picture_wrap_device(vmaf, &a, VMAF_PIX_FMT_YUV420P, 8, W, H, od, ds,
                                               on_release, &never) == -EINVAL);
            CHECK(a.ref == NULL && never.released == 0);
            cu.ctx_destroy(other); /* frees mem */
        }
        CHECK(vmaf_hip_picture_wrap_device(vmaf, &a, VMAF_PIX_FMT_YUV420P, 17, W, H, dd, ds,
                                           on_release, &never) == -EINVAL);
        CHECK(vmaf_hip_picture_wrap_device(vmaf, &a, VMAF_PIX_FMT_YUV420P, 10, W, H, dd, ds,
                                           on_release, &never) == -EINVAL);
        CHECK(never.released == 0 && a.ref == NULL);
        memset(&a, 0x5a, sizeof(a)); /* a refusal (past the allocation) leaves it empty */
        ds[1] = W / 2 + 8;
        CHECK(vmaf_hip_picture_wrap_device(vmaf, &a, VMAF_PIX_FMT_YUV420P, 8, W, H, dd, ds,
                                           on_release, &never) == -EINVAL);
        CHECK(a.ref == NULL && a.data[0] == NULL && a.w[0] == 0 && never.released == 0);
        ds[1] = W / 2;
        CHECK(vmaf_hip_picture_wrap_device(vmaf, &a, VMAF_PIX_FMT_YUV420P, 8, W, H, dd, ds,
                                           on_release, &never) == 0);
        CHECK(a.data[0] == b.data[0] && a.stride[0] == (ptrdiff_t)W && never.released == 0);
        CHECK(vmaf_picture_unref(&a) == 0);
        CHECK(never.released == 1);
        CHECK(vmaf_picture_unref(&b) == 0);
        CHECK(vmaf_close(vmaf) == 0);
    } else {
        CHECK(rc == -ENODEV && st == NULL);
    }
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0); /* lines already printed survive a crash */
    signal(SIGALRM, on_alarm);
    alarm(600);
    const char *require = getenv("VMAF_TEST_REQUIRE_GPU");
    int have_gpu = load_cuda() == 0;
    if (have_gpu) {
        int dev;
        have_gpu = cu.device_get(&dev, 0) == 0;
    }
    if (!have_gpu && require && strcmp(require, "1") == 0) {
        fprintf(stderr, "VMAF_TEST_REQUIRE_GPU=1 but no NVIDIA device\n");
        return 1;
    }
    argument_checks(have_gpu);
    if (!have_gpu) {
        printf("test_device: argument checks ok; GPU runs skipped: no device\n");
        return failures ? 1 : 0;
    }

    const char *size = getenv("VMAF_TEST_DEVICE_SIZE"), *frames = getenv("VMAF_TEST_DEVICE_FRAMES");
    if (size && sscanf(size, "%ux%u", &W, &H) != 2) return 2;
    if (frames) FRAMES = (unsigned)atoi(frames);
    if (W < 16 || H < 16 || W % 2 || H % 2 || FRAMES < 2) return 2;
    VmafModel *model = NULL;
    VmafModelConfig mcfg;
    memset(&mcfg, 0, sizeof(mcfg));
    CHECK(vmaf_model_load(&model, &mcfg, "vmaf_v0.6.1") == 0);
    if (!model) return 1;
    size_t scores = (size_t)FRAMES * N_SCORES * sizeof(double);
    double *want = malloc(scores), *got = malloc(scores);
    if (!want || !got) return 1;
    static const unsigned depths[] = {8, 10}, threads[] = {0, 2};
    for (unsigned d = 0; d < 2; d++) {
        CHECK(run(HOST_ALLOC, depths[d], 0, model, want) == 0);
        for (int mode = CUDA_OWN_CTX; mode <= HOST_SEMIPLANAR; mode++)
            for (unsigned t = 0; t < 2; t++) {
                memset(got, 0, scores);
                int rc = run(mode, depths[d], threads[t], model, got);
                int same = rc == 0 && memcmp(got, want, scores) == 0;
                printf("%s, %u-bit, %u threads: %s\n", mode_name[mode], depths[d], threads[t],
                       same ? "ok" : "DIFFERS");
                if (!same) {
                    failures++;
                    for (unsigned i = 0; i < FRAMES * N_SCORES; i++)
                        if (got[i] != want[i]) {
                            fprintf(stderr, "  rc %d; frame %u score %u: %.17g vs %.17g\n", rc,
                                    i / N_SCORES, i % N_SCORES, got[i], want[i]);
                            break;
                        }
                }
            }
        const double *mid = &want[FRAMES / 2 * N_SCORES];
        CHECK(mid[0] > 1.0 && mid[0] < 99.0 && mid[4] > 10.0 && mid[7] > 0.0);
    }
    vmaf_model_destroy(model);
    free(want);
    free(got);
    printf("test_device: %ux%u, %u frames: %s\n", W, H, FRAMES, failures ? "FAILED" : "ok");
    return failures ? 1 : 0;
}
