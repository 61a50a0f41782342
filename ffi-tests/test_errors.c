/* Misuse of the C API: every call must fail with the documented negative errno (as libvmaf 3.2
 * returns it), log an error and leave the process running. Also run under valgrind by the
 * harness (no invalid accesses). */
#include <errno.h>
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

static int is_zeroed(const VmafPicture *pic)
{
    static const VmafPicture zero;
    return !memcmp(pic, &zero, sizeof(zero));
}

/* A picture with a gradient in every plane. */
static void make_picture(VmafPicture *pic, enum VmafPixelFormat fmt, unsigned bpc, unsigned w,
                         unsigned h, unsigned seed)
{
    EXPECT(vmaf_picture_alloc(pic, fmt, bpc, w, h), 0);
    for (int p = 0; p < 3; p++) {
        for (unsigned y = 0; y < pic->h[p]; y++) {
            uint8_t *row = (uint8_t *)pic->data[p] + y * pic->stride[p];
            for (unsigned x = 0; x < pic->w[p]; x++) {
                unsigned v = (x * 3 + y * 5 + seed) & ((1u << bpc) - 1);
                if (bpc == 8)
                    row[x] = (uint8_t)v;
                else
                    ((uint16_t *)row)[x] = (uint16_t)v;
            }
        }
    }
}

static void test_dictionary(void)
{
    VmafFeatureDictionary *d = NULL;
    EXPECT(vmaf_feature_dictionary_set(NULL, "k", "v"), -EINVAL);
    EXPECT(vmaf_feature_dictionary_set(&d, NULL, "v"), -EINVAL);
    EXPECT(vmaf_feature_dictionary_set(&d, "k", NULL), -EINVAL);
    CHECK(d == NULL);
    EXPECT(vmaf_feature_dictionary_free(NULL), -EINVAL);
    EXPECT(vmaf_feature_dictionary_free(&d), 0);
    EXPECT(vmaf_feature_dictionary_set(&d, "k", "v"), 0);
    EXPECT(vmaf_feature_dictionary_set(&d, "k", "1.0"), 0);
    CHECK(d != NULL);
    EXPECT(vmaf_feature_dictionary_free(&d), 0);
    CHECK(d == NULL);
}

static void test_pictures(void)
{
    VmafPicture pic;
    EXPECT(vmaf_picture_alloc(NULL, VMAF_PIX_FMT_YUV420P, 8, 64, 64), -EINVAL);
    EXPECT(vmaf_picture_alloc(&pic, VMAF_PIX_FMT_UNKNOWN, 8, 64, 64), -EINVAL);
    EXPECT(vmaf_picture_alloc(&pic, (enum VmafPixelFormat)99, 8, 64, 64), -EINVAL);
    EXPECT(vmaf_picture_alloc(&pic, VMAF_PIX_FMT_YUV420P, 7, 64, 64), -EINVAL);
    EXPECT(vmaf_picture_alloc(&pic, VMAF_PIX_FMT_YUV420P, 17, 64, 64), -EINVAL);
    EXPECT(vmaf_picture_alloc(&pic, VMAF_PIX_FMT_YUV420P, 8, 0, 64), -EINVAL);
    EXPECT(vmaf_picture_alloc(&pic, VMAF_PIX_FMT_YUV420P, 8, 64, 0), -EINVAL);

    EXPECT(vmaf_picture_unref(NULL), -EINVAL);
    EXPECT(vmaf_picture_alloc(&pic, VMAF_PIX_FMT_YUV400P, 12, 31, 7), 0);
    CHECK(pic.data[0] && !pic.data[1] && !pic.data[2] && pic.w[1] == 0 && pic.h[2] == 0);
    EXPECT(vmaf_picture_unref(&pic), 0);
    CHECK(is_zeroed(&pic));
    EXPECT(vmaf_picture_unref(&pic), -EINVAL); /* unref twice */
}

static void test_models(VmafModel **model)
{
    VmafModelConfig cfg = { .name = "vmaf", .flags = VMAF_MODEL_FLAGS_DEFAULT };
    VmafModel *m = NULL;
    VmafModelCollection *mc = NULL;
    EXPECT(vmaf_model_load(&m, &cfg, "no_such_model"), -EINVAL);
    EXPECT(vmaf_model_load(NULL, &cfg, "vmaf_v0.6.1"), -EINVAL);
    EXPECT(vmaf_model_load(&m, NULL, "vmaf_v0.6.1"), -EINVAL);
    EXPECT(vmaf_model_load(&m, &cfg, NULL), -EINVAL);
    EXPECT(vmaf_model_load_from_path(&m, &cfg, "/nonexistent/model.json"), -EINVAL);
    EXPECT(vmaf_model_load_from_path(&m, &cfg, NULL), -EINVAL);
    CHECK(m == NULL);
    EXPECT(vmaf_model_collection_load(&m, &mc, &cfg, "no_such_model"), -EINVAL);
    EXPECT(vmaf_model_collection_load(&m, NULL, &cfg, "vmaf_b_v0.6.3"), -EINVAL);
    EXPECT(vmaf_model_collection_load_from_path(&m, &mc, &cfg, "/nonexistent.json"), -EINVAL);
    CHECK(m == NULL && mc == NULL);
    /* A device, or anything past any real model's size, is refused after a bounded read. */
    EXPECT(vmaf_model_load_from_path(&m, &cfg, "/dev/zero"), -EINVAL);
    EXPECT(vmaf_model_collection_load_from_path(&m, &mc, &cfg, "/dev/zero"), -EINVAL);
    CHECK(m == NULL && mc == NULL);
    /* Every built-in upstream v3.2.0 knows loads by name. */
    static const char *const builtins[] = {
        "vmaf_v0.6.1", "vmaf_v0.6.1neg", "vmaf_4k_v0.6.1", "vmaf_4k_v0.6.1neg",
        "vmaf_float_v0.6.1", "vmaf_float_v0.6.1neg", "vmaf_float_4k_v0.6.1",
        "vmaf_v1.0.16_3d0h", "vmaf_v1.0.16_3d0h_2160", "vmaf_v1.0.16_5d0h",
        "vmaf_v1.0.16_1d5h_2160", "vmaf_v1.0.16_hfr_3d0h", "vmaf_v1.0.16_hfr_3d0h_2160",
        "vmaf_v1.0.16_hfr_5d0h", "vmaf_v1.0.16_hfr_1d5h_2160",
    };
    for (size_t i = 0; i < sizeof(builtins) / sizeof(builtins[0]); i++) {
        EXPECT(vmaf_model_load(&m, &cfg, builtins[i]), 0);
        vmaf_model_destroy(m);
        m = NULL;
    }
    EXPECT(vmaf_model_collection_load(&m, &mc, &cfg, "vmaf_float_b_v0.6.3"), 0);
    vmaf_model_collection_destroy(mc);
    vmaf_model_destroy(m);
    m = NULL;
    mc = NULL;
    vmaf_model_destroy(NULL);
    vmaf_model_collection_destroy(NULL);

    /* NULL arguments leave the dictionary with the caller, as in libvmaf. */
    VmafFeatureDictionary *d = NULL;
    EXPECT(vmaf_feature_dictionary_set(&d, "adm_enhn_gain_limit", "100"), 0);
    EXPECT(vmaf_model_feature_overload(NULL, "adm", d), -EINVAL);
    EXPECT(vmaf_model_collection_feature_overload(NULL, NULL, "adm", d), -EINVAL);

    EXPECT(vmaf_model_load(&m, &cfg, "vmaf_v0.6.1"), 0);
    EXPECT(vmaf_model_feature_overload(m, NULL, d), -EINVAL);
    EXPECT(vmaf_model_feature_overload(m, "adm", NULL), -EINVAL);
    EXPECT(vmaf_model_feature_overload(m, "adm", d), 0); /* takes d */
    *model = m;

    EXPECT(vmaf_model_collection_load(&m, &mc, &cfg, "vmaf_b_v0.6.3"), 0);
    d = NULL;
    EXPECT(vmaf_feature_dictionary_set(&d, "vif_enhn_gain_limit", "100"), 0);
    EXPECT(vmaf_model_collection_feature_overload(m, &mc, "vif", d), 0); /* takes d */
    vmaf_model_collection_destroy(mc);
    vmaf_model_destroy(m);
}

static void test_context(VmafModel *model)
{
    VmafContext *vmaf = NULL;
    VmafPicture a, b;
    double s = 0;

    EXPECT(vmaf_init(NULL, config(0)), -EINVAL);
    EXPECT(vmaf_close(NULL), -EINVAL);
    EXPECT(vmaf_init(&vmaf, config(0)), 0);
    CHECK(vmaf != NULL);

    EXPECT(vmaf_use_feature(NULL, "psnr", NULL), -EINVAL);
    EXPECT(vmaf_use_feature(vmaf, NULL, NULL), -EINVAL);
    EXPECT(vmaf_use_feature(vmaf, "no_such_feature", NULL), -EINVAL);
    VmafFeatureDictionary *d = NULL;
    EXPECT(vmaf_feature_dictionary_set(&d, "enable_chroma", "true"), 0);
    EXPECT(vmaf_use_feature(vmaf, "no_such_feature", d), -EINVAL);
    EXPECT(vmaf_feature_dictionary_free(&d), 0); /* still ours after an unknown name */
    EXPECT(vmaf_use_features_from_model(NULL, model), -EINVAL);
    EXPECT(vmaf_use_features_from_model(vmaf, NULL), -EINVAL);
    EXPECT(vmaf_use_features_from_model_collection(vmaf, NULL), -EINVAL);
    /* Option values that are not finite numbers; the known name takes the dictionary. */
    d = NULL;
    EXPECT(vmaf_feature_dictionary_set(&d, "min_sse", "nan"), 0);
    EXPECT(vmaf_use_feature(vmaf, "psnr", d), -EINVAL);
    d = NULL;
    EXPECT(vmaf_feature_dictionary_set(&d, "vif_enhn_gain_limit", "inf"), 0);
    EXPECT(vmaf_use_feature(vmaf, "vif", d), -EINVAL);
    EXPECT(vmaf_use_feature(vmaf, "null", NULL), 0);
    EXPECT(vmaf_use_features_from_model(vmaf, model), 0);
    EXPECT(vmaf_use_feature(vmaf, "psnr", NULL), 0);
    EXPECT(vmaf_import_feature_score(vmaf, NULL, 1.0, 0), -EINVAL);
    EXPECT(vmaf_import_feature_score(NULL, "x", 1.0, 0), -EINVAL);

    /* Exactly one NULL picture: rejected, the other stays with the caller. */
    make_picture(&a, VMAF_PIX_FMT_YUV420P, 8, 64, 48, 0);
    EXPECT(vmaf_read_pictures(vmaf, &a, NULL, 0), -EINVAL);
    EXPECT(vmaf_read_pictures(vmaf, NULL, &a, 0), -EINVAL);
    EXPECT(vmaf_read_pictures(NULL, &a, &a, 0), -EINVAL);
    CHECK(!is_zeroed(&a));
    EXPECT(vmaf_picture_unref(&a), 0);

    /* Released (zeroed) pictures. */
    make_picture(&b, VMAF_PIX_FMT_YUV420P, 8, 64, 48, 1);
    EXPECT(vmaf_read_pictures(vmaf, &a, &b, 0), -EINVAL);
    CHECK(is_zeroed(&b)); /* taken over even on failure */

    /* Reference and distorted of different sizes, depths or formats. */
    make_picture(&a, VMAF_PIX_FMT_YUV420P, 8, 64, 48, 0);
    make_picture(&b, VMAF_PIX_FMT_YUV420P, 8, 32, 48, 1);
    EXPECT(vmaf_read_pictures(vmaf, &a, &b, 0), -EINVAL);
    CHECK(is_zeroed(&a) && is_zeroed(&b));
    EXPECT(vmaf_picture_unref(&a), -EINVAL);
    make_picture(&a, VMAF_PIX_FMT_YUV420P, 8, 64, 48, 0);
    make_picture(&b, VMAF_PIX_FMT_YUV420P, 10, 64, 48, 1);
    EXPECT(vmaf_read_pictures(vmaf, &a, &b, 0), -EINVAL);
    make_picture(&a, VMAF_PIX_FMT_YUV420P, 8, 64, 48, 0);
    make_picture(&b, VMAF_PIX_FMT_YUV444P, 8, 64, 48, 1);
    EXPECT(vmaf_read_pictures(vmaf, &a, &b, 0), -EINVAL);

    /* A picture whose fields were changed after allocation. */
    make_picture(&a, VMAF_PIX_FMT_YUV420P, 8, 64, 48, 0);
    make_picture(&b, VMAF_PIX_FMT_YUV420P, 8, 64, 48, 1);
    b.w[0] = 60;
    EXPECT(vmaf_read_pictures(vmaf, &a, &b, 0), -EINVAL);
    make_picture(&a, VMAF_PIX_FMT_YUV420P, 8, 64, 48, 0);
    make_picture(&b, VMAF_PIX_FMT_YUV420P, 8, 64, 48, 1);
    b.bpc = 10;
    EXPECT(vmaf_read_pictures(vmaf, &a, &b, 0), -EINVAL);

    /* Four good frames (the first fixes the stream parameters). */
    for (unsigned i = 0; i < 4; i++) {
        make_picture(&a, VMAF_PIX_FMT_YUV420P, 8, 64, 48, i);
        make_picture(&b, VMAF_PIX_FMT_YUV420P, 8, 64, 48, i * 7 + 1);
        EXPECT(vmaf_read_pictures(vmaf, &a, &b, i), 0);
        CHECK(is_zeroed(&a) && is_zeroed(&b));
    }
    /* The same struct as reference and distorted. */
    make_picture(&a, VMAF_PIX_FMT_YUV420P, 8, 64, 48, 9);
    EXPECT(vmaf_read_pictures(vmaf, &a, &a, 4), 0);
    CHECK(is_zeroed(&a));

    /* Pictures that differ from the first pair mid-stream. */
    make_picture(&a, VMAF_PIX_FMT_YUV420P, 8, 48, 48, 0);
    make_picture(&b, VMAF_PIX_FMT_YUV420P, 8, 48, 48, 1);
    EXPECT(vmaf_read_pictures(vmaf, &a, &b, 5), -EINVAL);
    make_picture(&a, VMAF_PIX_FMT_YUV444P, 8, 64, 48, 0);
    make_picture(&b, VMAF_PIX_FMT_YUV444P, 8, 64, 48, 1);
    EXPECT(vmaf_read_pictures(vmaf, &a, &b, 5), -EINVAL);
    make_picture(&a, VMAF_PIX_FMT_YUV420P, 10, 64, 48, 0);
    make_picture(&b, VMAF_PIX_FMT_YUV420P, 10, 64, 48, 1);
    EXPECT(vmaf_read_pictures(vmaf, &a, &b, 5), -EINVAL);

    /* Scores before the flush: motion2 does not exist yet. */
    EXPECT(vmaf_score_at_index(vmaf, model, &s, 0), -EINVAL);
    EXPECT(vmaf_feature_score_at_index(vmaf, "VMAF_integer_feature_motion2_score", &s, 0), -EINVAL);
    EXPECT(vmaf_score_pooled(vmaf, model, VMAF_POOL_METHOD_MEAN, &s, 0, 4), -EINVAL);
    EXPECT(vmaf_feature_score_at_index(vmaf, "psnr_y", &s, 0), 0);

    /* Bad arguments to the score functions. */
    EXPECT(vmaf_score_at_index(NULL, model, &s, 0), -EINVAL);
    EXPECT(vmaf_score_at_index(vmaf, NULL, &s, 0), -EINVAL);
    EXPECT(vmaf_score_at_index(vmaf, model, NULL, 0), -EINVAL);
    EXPECT(vmaf_score_at_index_model_collection(vmaf, NULL, NULL, 0), -EINVAL);
    EXPECT(vmaf_feature_score_at_index(vmaf, NULL, &s, 0), -EINVAL);
    EXPECT(vmaf_feature_score_at_index(vmaf, "psnr_y", NULL, 0), -EINVAL);
    EXPECT(vmaf_feature_score_at_index(vmaf, "no_such_feature", &s, 0), -EINVAL);
    EXPECT(vmaf_feature_score_at_index(vmaf, "psnr_y", &s, 1000), -EINVAL);
    EXPECT(vmaf_feature_score_pooled(vmaf, "psnr_y", VMAF_POOL_METHOD_UNKNOWN, &s, 0, 4), -EINVAL);
    EXPECT(vmaf_feature_score_pooled(vmaf, "psnr_y", VMAF_POOL_METHOD_NB, &s, 0, 4), -EINVAL);
    EXPECT(vmaf_feature_score_pooled(vmaf, "psnr_y", (enum VmafPoolingMethod)77, &s, 0, 4),
           -EINVAL);
    EXPECT(vmaf_feature_score_pooled(vmaf, "psnr_y", VMAF_POOL_METHOD_MEAN, &s, 3, 2), -EINVAL);
    EXPECT(vmaf_feature_score_pooled(vmaf, "psnr_y", VMAF_POOL_METHOD_MEAN, NULL, 0, 4), -EINVAL);
    EXPECT(vmaf_feature_score_pooled(vmaf, "no_such_feature", VMAF_POOL_METHOD_MEAN, &s, 0, 4),
           -EINVAL);
    EXPECT(vmaf_feature_score_pooled(vmaf, "psnr_y", VMAF_POOL_METHOD_MEAN, &s, 0, 5), -EINVAL);
    EXPECT(vmaf_score_pooled(vmaf, model, VMAF_POOL_METHOD_MEAN, &s, 4, 0), -EINVAL);
    EXPECT(vmaf_score_pooled_model_collection(vmaf, NULL, VMAF_POOL_METHOD_MEAN, NULL, 0, 4),
           -EINVAL);

    /* Flush once; then nothing more can be read. */
    EXPECT(vmaf_read_pictures(vmaf, NULL, NULL, 0), 0);
    EXPECT(vmaf_read_pictures(vmaf, NULL, NULL, 0), -EINVAL);
    make_picture(&a, VMAF_PIX_FMT_YUV420P, 8, 64, 48, 0);
    make_picture(&b, VMAF_PIX_FMT_YUV420P, 8, 64, 48, 1);
    EXPECT(vmaf_read_pictures(vmaf, &a, &b, 5), -EINVAL);
    EXPECT(vmaf_picture_unref(&a), 0);
    EXPECT(vmaf_picture_unref(&b), 0);

    EXPECT(vmaf_score_at_index(vmaf, model, &s, 0), 0);
    CHECK(s >= 0.0 && s <= 100.0);
    EXPECT(vmaf_score_pooled(vmaf, model, VMAF_POOL_METHOD_HARMONIC_MEAN, &s, 0, 4), 0);
    EXPECT(vmaf_score_at_index(vmaf, model, &s, 5), -EINVAL);

    /* Output. */
    EXPECT(vmaf_write_output(vmaf, "/nonexistent-dir/out.json", VMAF_OUTPUT_FORMAT_JSON), -EINVAL);
    EXPECT(vmaf_write_output(vmaf, NULL, VMAF_OUTPUT_FORMAT_JSON), -EINVAL);
    EXPECT(vmaf_write_output(vmaf, "/dev/null", VMAF_OUTPUT_FORMAT_NONE), -EINVAL);
    EXPECT(vmaf_write_output(vmaf, "/dev/null", (enum VmafOutputFormat)9), -EINVAL);
    EXPECT(vmaf_write_output(NULL, "/dev/null", VMAF_OUTPUT_FORMAT_XML), -EINVAL);
    EXPECT(vmaf_write_output(vmaf, "/dev/null", VMAF_OUTPUT_FORMAT_XML), 0);
    /* Written into whatever stdout is (the harness's pipe reads it), never replaced. */
    fflush(stdout);
    EXPECT(vmaf_write_output(vmaf, "/dev/stdout", VMAF_OUTPUT_FORMAT_JSON), 0);

    EXPECT(vmaf_close(vmaf), 0);
    /* A closed context is refused without reading its freed memory (valgrind checks that). */
    EXPECT(vmaf_close(vmaf), -EINVAL);
    EXPECT(vmaf_write_output(vmaf, "/dev/null", VMAF_OUTPUT_FORMAT_XML), -EINVAL);
    EXPECT(vmaf_score_pooled(vmaf, model, VMAF_POOL_METHOD_MEAN, &s, 0, 4), -EINVAL);
    /* Nor is a pointer vmaf_init never gave out. */
    EXPECT(vmaf_close((VmafContext *)&s), -EINVAL);
}

static void test_pool_misuse(void)
{
    VmafContext *vmaf = NULL;
    VmafPicture p1, p2;
    VmafPictureConfiguration pc;
    memset(&pc, 0, sizeof(pc));

    EXPECT(vmaf_init(&vmaf, config(2)), 0);
    EXPECT(vmaf_fetch_preallocated_picture(vmaf, &p1), -EINVAL); /* no pool */
    pc.pic_params.w = 64;
    pc.pic_params.h = 48;
    pc.pic_params.bpc = 8;
    pc.pic_params.pix_fmt = VMAF_PIX_FMT_YUV420P;
    pc.pic_cnt = 0;
    EXPECT(vmaf_preallocate_pictures(vmaf, pc), -EINVAL);
    pc.pic_cnt = 2;
    pc.pic_params.w = 0;
    EXPECT(vmaf_preallocate_pictures(vmaf, pc), -EINVAL);
    pc.pic_params.w = 64;
    pc.pic_params.bpc = 5;
    EXPECT(vmaf_preallocate_pictures(vmaf, pc), -EINVAL);
    pc.pic_params.bpc = 8;
    pc.pic_params.pix_fmt = VMAF_PIX_FMT_UNKNOWN;
    EXPECT(vmaf_preallocate_pictures(vmaf, pc), -EINVAL);
    pc.pic_params.pix_fmt = VMAF_PIX_FMT_YUV420P;
    EXPECT(vmaf_preallocate_pictures(NULL, pc), -EINVAL);
    EXPECT(vmaf_preallocate_pictures(vmaf, pc), 0);
    EXPECT(vmaf_fetch_preallocated_picture(NULL, &p1), -EINVAL);
    EXPECT(vmaf_fetch_preallocated_picture(vmaf, NULL), -EINVAL);

    /* Close while the caller still holds every pooled picture: libvmaf would block forever;
     * we return, and the pictures stay usable until released. */
    EXPECT(vmaf_fetch_preallocated_picture(vmaf, &p1), 0);
    EXPECT(vmaf_fetch_preallocated_picture(vmaf, &p2), 0);
    EXPECT(vmaf_close(vmaf), 0);
    memset(p1.data[0], 7, (size_t)p1.stride[0] * p1.h[0]);
    memset(p2.data[2], 9, (size_t)p2.stride[2] * p2.h[2]);
    EXPECT(vmaf_picture_unref(&p1), 0);
    EXPECT(vmaf_picture_unref(&p2), 0);
    EXPECT(vmaf_picture_unref(&p2), -EINVAL);
}

int main(void)
{
    VmafModel *model = NULL;
    CHECK(vmaf_version() != NULL);
    test_dictionary();
    test_pictures();
    test_models(&model);
    if (model)
        test_context(model);
    else
        failures++;
    vmaf_model_destroy(model);
    test_pool_misuse();
    if (failures) {
        fprintf(stderr, "test_errors: %d failure(s)\n", failures);
        return 1;
    }
    printf("test_errors: ok\n");
    return 0;
}
