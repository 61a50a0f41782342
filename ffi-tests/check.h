/* Assertions shared by the C tests: each failed check prints where and what, and counts into
 * `failures` (atomically, as some tests check from several threads); a test's main returns
 * non-zero when any failed. */
#ifndef VMAF_HIP_FFI_TESTS_CHECK_H
#define VMAF_HIP_FFI_TESTS_CHECK_H

#include <stdio.h>

static int failures;

#define FAIL_ONE() __atomic_add_fetch(&failures, 1, __ATOMIC_SEQ_CST)

/* `call` must return `want`. */
#define EXPECT(call, want)                                                              \
    do {                                                                                \
        int rc_ = (call);                                                               \
        if (rc_ != (want)) {                                                            \
            fprintf(stderr, "%s:%d: %s returned %d, expected %d\n", __FILE__, __LINE__, \
                    #call, rc_, (int)(want));                                           \
            FAIL_ONE();                                                                 \
        }                                                                               \
    } while (0)

/* `cond` must hold. */
#define CHECK(cond)                                                            \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "%s:%d: FAILED: %s\n", __FILE__, __LINE__, #cond); \
            FAIL_ONE();                                                        \
        }                                                                      \
    } while (0)

#endif
