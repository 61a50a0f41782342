/*
 * Smoke test of the libvmaf_hip.h contract.
 *
 * Without a GPU (CI): argument checking, NULL handling and the -ENODEV path;
 * prints "skipped: no device" for the device part and exits 0.
 * With a GPU: opens the default and the first device, imports a state into a
 * context and frees it after vmaf_close().
 *
 * Build by hand:
 *   cc -Iinclude/libvmaf ffi-tests/test_hip_smoke.c -Ltarget/debug -lvmaf_hip \
 *      -Wl,-rpath,$PWD/target/debug -o test_hip_smoke
 */
#include <errno.h>
#include <stdio.h>

#include "libvmaf_hip.h"

static int failures;

#define CHECK(cond)                                                          \
    do {                                                                     \
        if (!(cond)) {                                                       \
            fprintf(stderr, "%s:%d: FAILED: %s\n", __FILE__, __LINE__, #cond); \
            failures++;                                                      \
        }                                                                    \
    } while (0)

static VmafHipConfiguration hip_cfg(int device_index, int flags)
{
    VmafHipConfiguration cfg;
    cfg.device_index = device_index;
    cfg.flags = flags;
    return cfg;
}

/* What must hold whether or not a GPU is present. */
static void test_contract(int n_devices)
{
    VmafHipState *state = NULL;

    CHECK(vmaf_hip_available() == 1);

    CHECK(vmaf_hip_state_init(NULL, hip_cfg(-1, 0)) == -EINVAL);
    CHECK(vmaf_hip_state_init(&state, hip_cfg(-2, 0)) == -EINVAL);
    CHECK(state == NULL);
    CHECK(vmaf_hip_state_init(&state, hip_cfg(-1, 1)) == -EINVAL);
    CHECK(state == NULL);
    CHECK(vmaf_hip_state_init(&state, hip_cfg(0, 0x100)) == -EINVAL);
    CHECK(state == NULL);

    /* An index past the last device is -ENODEV and leaves the output NULL,
     * even when it held something before. */
    state = (VmafHipState *)&state;
    CHECK(vmaf_hip_state_init(&state, hip_cfg(n_devices, 0)) == -ENODEV);
    CHECK(state == NULL);

    CHECK(vmaf_hip_import_state(NULL, NULL) == -EINVAL);

    vmaf_hip_state_free(NULL);
    vmaf_hip_state_free(&state);
    CHECK(state == NULL);
}

static void test_no_device(void)
{
    VmafHipState *state = NULL;
    CHECK(vmaf_hip_state_init(&state, hip_cfg(-1, 0)) == -ENODEV);
    CHECK(state == NULL);
    CHECK(vmaf_hip_state_init(&state, hip_cfg(0, 0)) == -ENODEV);
    CHECK(state == NULL);
    printf("skipped: no device\n");
}

static void test_device(int n_devices)
{
    VmafHipState *first = NULL, *dev0 = NULL;
    VmafContext *vmaf = NULL;
    VmafConfiguration cfg = { 0 };

    CHECK(n_devices >= 1);
    CHECK(vmaf_hip_state_init(&first, hip_cfg(-1, 0)) == 0);
    CHECK(first != NULL);
    CHECK(vmaf_hip_state_init(&dev0, hip_cfg(0, 0)) == 0);
    CHECK(dev0 != NULL);
    CHECK(first != dev0);

    CHECK(vmaf_init(&vmaf, cfg) == 0);
    CHECK(vmaf != NULL);
    if (vmaf) {
        CHECK(vmaf_hip_import_state(vmaf, NULL) == -EINVAL);
        CHECK(vmaf_hip_import_state(NULL, first) == -EINVAL);
        CHECK(vmaf_hip_import_state(vmaf, first) == 0);
        CHECK(vmaf_close(vmaf) == 0);
    }

    vmaf_hip_state_free(&first);
    CHECK(first == NULL);
    vmaf_hip_state_free(&dev0);
    CHECK(dev0 == NULL);
    vmaf_hip_state_free(&dev0);
    printf("device part: ok (%d device(s))\n", n_devices);
}

int main(void)
{
    const int n_devices = vmaf_hip_list_devices();
    CHECK(n_devices >= 0);

    test_contract(n_devices);
    if (n_devices == 0)
        test_no_device();
    else
        test_device(n_devices);

    if (failures) {
        fprintf(stderr, "test_hip_smoke: %d check(s) failed\n", failures);
        return 1;
    }
    printf("test_hip_smoke: ok\n");
    return 0;
}
