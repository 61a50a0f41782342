/*
 * gfx names and their EF_AMDGPU_MACH values (the low byte of an AMDGPU ELF's e_flags), shared
 * by the fake runtime (to log what it loads) and the fake hiprtc (to stamp what it emits).
 * Only the archs the tests and build.rs's default list use.
 */
#ifndef FAKEHIP_AMDGPU_MACH_H
#define FAKEHIP_AMDGPU_MACH_H

#include <string.h>

static const struct {
    const char *name;
    unsigned mach;
} amdgpu_machs[] = {
    {"gfx900", 0x2c},  {"gfx906", 0x2f},  {"gfx908", 0x30},  {"gfx1010", 0x33},
    {"gfx1030", 0x36}, {"gfx90a", 0x3f},  {"gfx940", 0x40},  {"gfx1100", 0x41},
    {"gfx1150", 0x43}, {"gfx1103", 0x44}, {"gfx1101", 0x46}, {"gfx1102", 0x47},
    {"gfx1200", 0x48}, {"gfx1151", 0x4a}, {"gfx941", 0x4b},  {"gfx942", 0x4c},
    {"gfx1201", 0x4e},
};

static inline const char *amdgpu_mach_name(unsigned mach)
{
    for (size_t i = 0; i < sizeof amdgpu_machs / sizeof amdgpu_machs[0]; i++)
        if (amdgpu_machs[i].mach == mach)
            return amdgpu_machs[i].name;
    return "unknown";
}

/* The mach of `arch` ("gfx90a", "gfx90a:xnack-": features ignored), or 0 when unknown. */
static inline unsigned amdgpu_mach_of(const char *arch)
{
    size_t n = strcspn(arch, ":");
    for (size_t i = 0; i < sizeof amdgpu_machs / sizeof amdgpu_machs[0]; i++)
        if (strlen(amdgpu_machs[i].name) == n && !strncmp(amdgpu_machs[i].name, arch, n))
            return amdgpu_machs[i].mach;
    return 0;
}

#endif
