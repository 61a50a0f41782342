/* vmaf_hip_picture_wrap: pictures that read the caller's planes in place. Frames with padded
 * strides (8-bit and 10-bit 4:2:0) are scored through wrapped pictures with 0 and 2 worker
 * threads, on the CPU and, when a device exists, on the GPU; every per-frame score must equal a
 * run that copies the same frames into pictures from vmaf_picture_alloc, bit for bit, and every
 * frame's memory must be handed back through the release callback exactly once. Then the
 * argument checks: each refusal returns -EINVAL, leaves the picture empty and releases
 * nothing. */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <libvmaf/libvmaf.h>
#include "libvmaf_hip.h"

#include "check.h"

#define W 176
#define H 144
#define PAD 24
#define FRAMES 30

static int released;

/* A caller's frame: one allocation, planes at `data` with `stride` bytes per row. */
struct frame {
    unsigned char *mem;
    void *data[3];
    ptrdiff_t stride[3];
    unsigned w[3], h[3];
    unsigned bpc;
};

static void on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "test_wrap: timed out\n";
    if (write(2, msg, sizeof(msg) - 1) < 0) _exit(3);
    _exit(2);
}

static void release_frame(void *opaque)
{
    struct frame *f = opaque;
    free(f->mem);
    free(f);
    __atomic_add_fetch(&released, 1, __ATOMIC_SEQ_CST);
}

static unsigned sample(unsigned x, unsigned y, unsigned i, int p, int dist, unsigned bpc)
{
    unsigned v = 16 + ((x + i) * 2 + y * 3 + ((((x + i) >> 3) ^ (y >> 3)) & 3) * 40 + p * 50) % 220;
    if (dist) v = v / 24 * 24 + (x * 7 + y * 13 + i) % 5;
    return v << (bpc - 8);
}

/* A frame of W x H 4:2:0 at `bpc` bits, rows padded by PAD samples. */
static struct frame *make_frame(unsigned i, int dist, unsigned bpc)
{
    struct frame *f = calloc(1, sizeof(*f));
    unsigned bps = bpc > 8 ? 2 : 1;
    size_t total = 0, off[3];
    if (!f) return NULL;
    f->bpc = bpc;
    for (int p = 0; p < 3; p++) {
        f->w[p] = p ? W / 2 : W;
        f->h[p] = p ? H / 2 : H;
        f->stride[p] = (ptrdiff_t)((f->w[p] + PAD) * bps);
        off[p] = total;
        total += (size_t)f->stride[p] * f->h[p];
    }
    f->mem = malloc(total);
    if (!f->mem) {
        free(f);
        return NULL;
    }
    memset(f->mem, 0xee, total);
    for (int p = 0; p < 3; p++) {
        f->data[p] = f->mem + off[p];
        for (unsigned y = 0; y < f->h[p]; y++) {
            unsigned char *row = f->mem + off[p] + (size_t)y * f->stride[p];
            for (unsigned x = 0; x < f->w[p]; x++) {
                unsigned v = sample(x, y, i, p, dist, bpc);
                if (bps == 1)
                    row[x] = (unsigned char)v;
                else
                    ((uint16_t *)row)[x] = (uint16_t)v;
            }
        }
    }
    return f;
}

/* A picture from vmaf_picture_alloc holding a copy of `f` (which is released). */
static int copied(VmafPicture *pic, struct frame *f)
{
    unsigned bps = f->bpc > 8 ? 2 : 1;
    if (vmaf_picture_alloc(pic, VMAF_PIX_FMT_YUV420P, f->bpc, W, H)) return -1;
    for (int p = 0; p < 3; p++)
        for (unsigned y = 0; y < f->h[p]; y++)
            memcpy((unsigned char *)pic->data[p] + (size_t)y * pic->stride[p],
                   (unsigned char *)f->data[p] + (size_t)y * f->stride[p], (size_t)f->w[p] * bps);
    release_frame(f);
    return 0;
}

/* Scores FRAMES frames at `bpc`, wrapped or copied; per-frame VMAF into `out`. */
static int run(VmafModel *model, VmafHipState *hip, int wrap, unsigned threads, unsigned bpc,
               double *out)
{
    VmafContext *vmaf = NULL;
    VmafConfiguration cfg;
    int rc = 0;
    memset(&cfg, 0, sizeof(cfg));
    cfg.log_level = VMAF_LOG_LEVEL_WARNING;
    cfg.n_threads = threads;
    if (vmaf_init(&vmaf, cfg)) return -1;
    if (hip && vmaf_hip_import_state(vmaf, hip)) rc = -1;
    if (!rc && vmaf_use_features_from_model(vmaf, model)) rc = -1;
    for (unsigned i = 0; !rc && i < FRAMES; i++) {
        VmafPicture pics[2];
        for (int d = 0; d < 2; d++) {
            struct frame *f = make_frame(i, d, bpc);
            if (!f) {
                rc = -1;
                break;
            }
            if (wrap) {
                if (vmaf_hip_picture_wrap(&pics[d], VMAF_PIX_FMT_YUV420P, bpc, W, H, f->data,
                                          f->stride, release_frame, f))
                    rc = -1;
            } else if (copied(&pics[d], f)) {
                rc = -1;
            }
        }
        if (!rc && vmaf_read_pictures(vmaf, &pics[0], &pics[1], i)) rc = -1;
    }
    if (!rc && vmaf_read_pictures(vmaf, NULL, NULL, 0)) rc = -1;
    for (unsigned i = 0; !rc && i < FRAMES; i++)
        if (vmaf_score_at_index(vmaf, model, &out[i], i)) rc = -1;
    if (vmaf_close(vmaf)) rc = -1;
    return rc;
}

static void check_refusals(void)
{
    VmafPicture pic;
    struct frame *f = make_frame(0, 0, 8), *deep = make_frame(0, 0, 10);
    void *no_data[3] = {NULL, NULL, NULL};
    ptrdiff_t bad[3];
    int before = released;
    if (!f || !deep) {
        CHECK(0);
        return;
    }
#define REFUSED(call)                         \
    do {                                      \
        memset(&pic, 0x5a, sizeof(pic));      \
        EXPECT(call, -EINVAL);                \
        CHECK(pic.ref == NULL);               \
    } while (0)
    EXPECT(vmaf_hip_picture_wrap(NULL, VMAF_PIX_FMT_YUV420P, 8, W, H, f->data, f->stride,
                                 release_frame, f),
           -EINVAL);
    REFUSED(vmaf_hip_picture_wrap(&pic, VMAF_PIX_FMT_YUV420P, 8, W, H, NULL, f->stride,
                                  release_frame, f));
    REFUSED(vmaf_hip_picture_wrap(&pic, VMAF_PIX_FMT_YUV420P, 8, W, H, f->data, NULL,
                                  release_frame, f));
    REFUSED(vmaf_hip_picture_wrap(&pic, VMAF_PIX_FMT_YUV420P, 8, W, H, no_data, f->stride,
                                  release_frame, f));
    REFUSED(vmaf_hip_picture_wrap(&pic, VMAF_PIX_FMT_UNKNOWN, 8, W, H, f->data, f->stride,
                                  release_frame, f));
    REFUSED(vmaf_hip_picture_wrap(&pic, VMAF_PIX_FMT_YUV420P, 7, W, H, f->data, f->stride,
                                  release_frame, f));
    REFUSED(vmaf_hip_picture_wrap(&pic, VMAF_PIX_FMT_YUV420P, 8, 0, H, f->data, f->stride,
                                  release_frame, f));
    REFUSED(vmaf_hip_picture_wrap(&pic, VMAF_PIX_FMT_YUV420P, 8, 70000, H, f->data, f->stride,
                                  release_frame, f));
    memcpy(bad, f->stride, sizeof(bad));
    bad[0] = -bad[0];
    REFUSED(vmaf_hip_picture_wrap(&pic, VMAF_PIX_FMT_YUV420P, 8, W, H, f->data, bad,
                                  release_frame, f));
    bad[0] = W - 1;
    REFUSED(vmaf_hip_picture_wrap(&pic, VMAF_PIX_FMT_YUV420P, 8, W, H, f->data, bad,
                                  release_frame, f));
    /* A plane larger than the address space. */
    bad[0] = PTRDIFF_MAX / 64;
    REFUSED(vmaf_hip_picture_wrap(&pic, VMAF_PIX_FMT_YUV420P, 8, W, H, f->data, bad,
                                  release_frame, f));
    /* 16-bit samples need even pointers and strides. */
    {
        void *odd[3] = {(char *)deep->data[0] + 1, deep->data[1], deep->data[2]};
        REFUSED(vmaf_hip_picture_wrap(&pic, VMAF_PIX_FMT_YUV420P, 10, W, H, odd, deep->stride,
                                      release_frame, deep));
        memcpy(bad, deep->stride, sizeof(bad));
        bad[1] += 1;
        REFUSED(vmaf_hip_picture_wrap(&pic, VMAF_PIX_FMT_YUV420P, 10, W, H, deep->data, bad,
                                      release_frame, deep));
    }
#undef REFUSED
    CHECK(released == before);

    /* Accepted and released unread: the callback runs once, at the unref. */
    EXPECT(vmaf_hip_picture_wrap(&pic, VMAF_PIX_FMT_YUV420P, 8, W, H, f->data, f->stride,
                                 release_frame, f),
           0);
    CHECK(pic.data[0] == f->data[0] && pic.stride[1] == f->stride[1] && pic.w[1] == W / 2);
    CHECK(released == before);
    EXPECT(vmaf_picture_unref(&pic), 0);
    CHECK(released == before + 1);
    EXPECT(vmaf_picture_unref(&pic), -EINVAL);
    CHECK(released == before + 1);

    /* 4:0:0 ignores the chroma pointers; a NULL callback is allowed. */
    {
        void *luma_only[3] = {deep->data[0], NULL, NULL};
        EXPECT(vmaf_hip_picture_wrap(&pic, VMAF_PIX_FMT_YUV400P, 10, W, H, luma_only,
                                     deep->stride, NULL, NULL),
               0);
        CHECK(pic.h[1] == 0 && pic.data[1] == NULL);
        EXPECT(vmaf_picture_unref(&pic), 0);
        release_frame(deep);
    }
}

int main(void)
{
    VmafModel *model = NULL;
    VmafModelConfig mcfg;
    VmafHipState *hip = NULL;
    VmafHipConfiguration hcfg = {.device_index = -1, .flags = 0};
    static double want[FRAMES], got[FRAMES];
    static const unsigned threads[] = {0, 2};
    const char *require = getenv("VMAF_TEST_REQUIRE_GPU");
    int have_gpu;

    signal(SIGALRM, on_alarm);
    alarm(600);
    memset(&mcfg, 0, sizeof(mcfg));
    CHECK(vmaf_model_load(&model, &mcfg, "vmaf_v0.6.1") == 0);
    if (!model) return 1;

    check_refusals();

    have_gpu = vmaf_hip_state_init(&hip, hcfg) == 0;
    if (!have_gpu && require && strcmp(require, "1") == 0) {
        fprintf(stderr, "VMAF_TEST_REQUIRE_GPU=1 but no device\n");
        return 1;
    }
    for (unsigned bpc = 8; bpc <= 10; bpc += 2) {
        released = 0;
        CHECK(run(model, NULL, 0, 0, bpc, want) == 0);
        CHECK(released == 2 * FRAMES);
        for (int on_gpu = 0; on_gpu <= have_gpu; on_gpu++) {
            for (unsigned t = 0; t < sizeof(threads) / sizeof(threads[0]); t++) {
                int same;
                released = 0;
                memset(got, 0, sizeof(got));
                CHECK(run(model, on_gpu ? hip : NULL, 1, threads[t], bpc, got) == 0);
                same = memcmp(got, want, sizeof(want)) == 0;
                CHECK(same);
                CHECK(released == 2 * FRAMES);
                printf("wrap %u-bit, %u threads, %s: %s (frame 0 vmaf %.6f)\n", bpc, threads[t],
                       on_gpu ? "GPU" : "CPU", same ? "ok" : "DIFFERS", got[0]);
            }
        }
    }
    vmaf_hip_state_free(&hip);
    vmaf_model_destroy(model);
    return failures != 0;
}
