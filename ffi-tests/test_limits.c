/* Sizes chosen by the caller: every call past a documented limit fails with -EINVAL, and every
 * allocation that does not fit fails with -ENOMEM, never an abort. The harness runs this program
 * under a 4 GiB address-space limit (`ulimit -v 4194304`) so the out-of-memory cases are
 * deterministic; at the end the same context still scores a frame pair. */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <libvmaf/libvmaf.h>

#include "check.h"


static VmafConfiguration config(unsigned n_threads)
{
    VmafConfiguration cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.log_level = VMAF_LOG_LEVEL_ERROR;
    cfg.n_threads = n_threads;
    cfg.n_subsample = 1;
    return cfg;
}

static VmafPictureConfiguration pool_config(enum VmafPixelFormat fmt, unsigned bpc, unsigned w,
                                            unsigned h, unsigned cnt)
{
    VmafPictureConfiguration pc;
    memset(&pc, 0, sizeof(pc));
    pc.pic_params.w = w;
    pc.pic_params.h = h;
    pc.pic_params.bpc = bpc;
    pc.pic_params.pix_fmt = fmt;
    pc.pic_cnt = cnt;
    return pc;
}

static int is_zeroed(const VmafPicture *pic)
{
    static const VmafPicture zero;
    return !memcmp(pic, &zero, sizeof(zero));
}

/* A 64x64 4:2:0 8-bit picture with a gradient in every plane. */
static void make_picture(VmafPicture *pic, unsigned seed)
{
    EXPECT(vmaf_picture_alloc(pic, VMAF_PIX_FMT_YUV420P, 8, 64, 64), 0);
    for (int p = 0; p < 3; p++)
        for (unsigned y = 0; y < pic->h[p]; y++)
            for (unsigned x = 0; x < pic->w[p]; x++)
                ((uint8_t *)pic->data[p])[y * pic->stride[p] + x] =
                    (uint8_t)((x * 3 + y * 5 + seed) & 0xff);
}

static void test_threads(void)
{
    VmafContext *vmaf = NULL;
    EXPECT(vmaf_init(&vmaf, config(100000)), -EINVAL);
    CHECK(vmaf == NULL);
    EXPECT(vmaf_init(&vmaf, config(1025)), -EINVAL);
    CHECK(vmaf == NULL);
    EXPECT(vmaf_init(&vmaf, config(UINT_MAX)), -EINVAL);
    CHECK(vmaf == NULL);
    EXPECT(vmaf_init(&vmaf, config(4)), 0);
    CHECK(vmaf != NULL);
    EXPECT(vmaf_close(vmaf), 0);
}

static void test_picture_alloc(void)
{
    VmafPicture pic;
    memset(&pic, 0, sizeof(pic));
    /* 65535x65535 4:4:4 16-bit is within the side limit but needs 24 GiB. */
    EXPECT(vmaf_picture_alloc(&pic, VMAF_PIX_FMT_YUV444P, 16, 65535, 65535), -ENOMEM);
    EXPECT(vmaf_picture_alloc(&pic, VMAF_PIX_FMT_YUV420P, 8, 1, UINT_MAX), -EINVAL);
    EXPECT(vmaf_picture_alloc(&pic, VMAF_PIX_FMT_YUV420P, 8, UINT_MAX, 1), -EINVAL);
    EXPECT(vmaf_picture_alloc(&pic, VMAF_PIX_FMT_YUV400P, 8, 65537, 2), -EINVAL);
    EXPECT(vmaf_picture_alloc(&pic, VMAF_PIX_FMT_YUV400P, 8, 2, 65537), -EINVAL);
    CHECK(is_zeroed(&pic));
    /* The limit itself is allowed. */
    EXPECT(vmaf_picture_alloc(&pic, VMAF_PIX_FMT_YUV420P, 10, 65536, 2), 0);
    CHECK(pic.w[0] == 65536 && pic.h[0] == 2 && pic.w[1] == 32768 && pic.h[1] == 1);
    CHECK(pic.stride[0] == 2 * 65536);
    EXPECT(vmaf_picture_unref(&pic), 0);
}

static void test_import_index(VmafContext *vmaf)
{
    EXPECT(vmaf_import_feature_score(vmaf, "x", 1.0, UINT_MAX), -EINVAL);
    EXPECT(vmaf_import_feature_score(vmaf, "x", 1.0, 1u << 26), -EINVAL);
    double s = 0.0;
    /* The refused imports left nothing behind. */
    EXPECT(vmaf_feature_score_at_index(vmaf, "x", &s, 0), -EINVAL);

    /* Within the limit, a far index costs a 1 GiB vector per feature: under 4 GiB the third
     * or fourth one cannot be had, and that is -ENOMEM, not an abort. */
    VmafContext *big = NULL;
    EXPECT(vmaf_init(&big, config(0)), 0);
    int first_nomem = -1;
    for (int i = 0; i < 8 && first_nomem < 0; i++) {
        char name[8];
        snprintf(name, sizeof(name), "f%d", i);
        int rc = vmaf_import_feature_score(big, name, i + 0.5, (1u << 26) - 1);
        if (rc == -ENOMEM)
            first_nomem = i;
        else
            EXPECT(rc, 0);
    }
    CHECK(first_nomem >= 1 && first_nomem <= 4);
    EXPECT(vmaf_feature_score_at_index(big, "f0", &s, (1u << 26) - 1), 0);
    CHECK(s == 0.5);
    EXPECT(vmaf_close(big), 0);
}

static void test_read_index(VmafContext *vmaf)
{
    VmafPicture a, b;
    make_picture(&a, 1);
    make_picture(&b, 2);
    EXPECT(vmaf_read_pictures(vmaf, &a, &b, 4000000000u), -EINVAL);
    /* Taken over even though refused. */
    CHECK(is_zeroed(&a) && is_zeroed(&b));
    make_picture(&a, 1);
    make_picture(&b, 2);
    EXPECT(vmaf_read_pictures(vmaf, &a, &b, 1u << 26), -EINVAL);
    CHECK(is_zeroed(&a) && is_zeroed(&b));
}

static void test_pool(VmafContext *vmaf)
{
    EXPECT(vmaf_preallocate_pictures(vmaf, pool_config(VMAF_PIX_FMT_YUV420P, 8, 1920, 1080,
                                                       100000)),
           -EINVAL);
    EXPECT(vmaf_preallocate_pictures(vmaf, pool_config(VMAF_PIX_FMT_YUV420P, 8, 1920, 1080,
                                                       1025)),
           -EINVAL);
    EXPECT(vmaf_preallocate_pictures(vmaf, pool_config(VMAF_PIX_FMT_YUV420P, 8, 65537, 16, 2)),
           -EINVAL);
    /* 1024 pictures of 50 MiB: about 80 fit, then -ENOMEM, and those are freed again... */
    EXPECT(vmaf_preallocate_pictures(vmaf, pool_config(VMAF_PIX_FMT_YUV444P, 16, 3840, 2160,
                                                       1024)),
           -ENOMEM);
    /* ...so no pool was made, and a 2 GiB pool fits afterwards. */
    VmafPicture pic;
    memset(&pic, 0, sizeof(pic));
    EXPECT(vmaf_fetch_preallocated_picture(vmaf, &pic), -EINVAL);
    EXPECT(vmaf_preallocate_pictures(vmaf, pool_config(VMAF_PIX_FMT_YUV444P, 16, 3840, 2160,
                                                       40)),
           0);
    EXPECT(vmaf_fetch_preallocated_picture(vmaf, &pic), 0);
    CHECK(pic.w[0] == 3840 && pic.h[0] == 2160 && pic.bpc == 16);
    EXPECT(vmaf_picture_unref(&pic), 0);
    /* A failed replacement keeps the pool in place. */
    EXPECT(vmaf_preallocate_pictures(vmaf, pool_config(VMAF_PIX_FMT_YUV444P, 16, 3840, 2160,
                                                       1024)),
           -ENOMEM);
    EXPECT(vmaf_fetch_preallocated_picture(vmaf, &pic), 0);
    CHECK(pic.w[0] == 3840);
    EXPECT(vmaf_picture_unref(&pic), 0);
    /* A small pool replaces (and frees) the big one. */
    EXPECT(vmaf_preallocate_pictures(vmaf, pool_config(VMAF_PIX_FMT_YUV420P, 8, 64, 64, 2)), 0);
}

static void test_still_scores(VmafContext *vmaf)
{
    VmafPicture a, b;
    EXPECT(vmaf_use_feature(vmaf, "psnr", NULL), 0);
    EXPECT(vmaf_fetch_preallocated_picture(vmaf, &a), 0);
    EXPECT(vmaf_fetch_preallocated_picture(vmaf, &b), 0);
    for (int p = 0; p < 3; p++)
        for (unsigned y = 0; y < a.h[p]; y++)
            for (unsigned x = 0; x < a.w[p]; x++) {
                ((uint8_t *)a.data[p])[y * a.stride[p] + x] = (uint8_t)((x + y) & 0x7f);
                /* Every luma sample off by 2: MSE 4, PSNR 10*log10(255^2/4). */
                ((uint8_t *)b.data[p])[y * b.stride[p] + x] =
                    (uint8_t)(((x + y) & 0x7f) + (p == 0 ? 2 : 0));
            }
    EXPECT(vmaf_read_pictures(vmaf, &a, &b, 0), 0);
    EXPECT(vmaf_read_pictures(vmaf, NULL, NULL, 0), 0);
    double y = 0.0, cb = 0.0;
    EXPECT(vmaf_feature_score_at_index(vmaf, "psnr_y", &y, 0), 0);
    EXPECT(vmaf_feature_score_at_index(vmaf, "psnr_cb", &cb, 0), 0);
    printf("psnr_y %.6f psnr_cb %.6f\n", y, cb);
    CHECK(y > 42.11020 && y < 42.11021); /* 10*log10(65025/4) = 42.110204 */
    CHECK(cb == 60.0);                 /* identical planes: libvmaf's 8-bit cap */
}

int main(void)
{
    test_threads();
    test_picture_alloc();
    VmafContext *vmaf = NULL;
    EXPECT(vmaf_init(&vmaf, config(0)), 0);
    test_import_index(vmaf);
    test_read_index(vmaf);
    test_pool(vmaf);
    test_still_scores(vmaf);
    EXPECT(vmaf_close(vmaf), 0);
    if (failures) {
        fprintf(stderr, "%d failure(s)\n", failures);
        return 1;
    }
    printf("test_limits: all checks passed\n");
    return 0;
}
