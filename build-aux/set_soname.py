#!/usr/bin/env python3
"""Rewrites the SONAME of an ELF shared library in place.

usage: set_soname.py LIB OLD NEW

The library must already carry SONAME OLD (build.rs links the cdylib with the placeholder
SONAME `libvmaf_hip.so`), and NEW must not be longer than OLD: the string is overwritten in
.dynstr and padded with NUL bytes, so no section moves. This lets meson install the library
under the SONAME libvmaf.so.3 from the very file `cargo build` made, without relinking it
(relinking with other arguments would make cargo rebuild the crate on every alternation
between `cargo test` and meson)."""
import struct
import sys

DT_NULL, DT_STRTAB, DT_SONAME = 0, 5, 14
PT_LOAD, PT_DYNAMIC = 1, 2


def main():
    path, old, new = sys.argv[1], sys.argv[2].encode(), sys.argv[3].encode()
    if len(new) > len(old):
        sys.exit(f"set_soname: {new!r} is longer than {old!r}")
    with open(path, "r+b") as f:
        data = bytearray(f.read())
        if data[:4] != b"\x7fELF":
            sys.exit(f"set_soname: {path} is not an ELF file")
        is64 = data[4] == 2
        end = "<" if data[5] == 1 else ">"
        if is64:
            phoff, = struct.unpack_from(end + "Q", data, 0x20)
            phentsize, phnum = struct.unpack_from(end + "HH", data, 0x36)
            phdr = end + "IIQQQQQQ"  # type flags offset vaddr paddr filesz memsz align
            dyn, dynsize = end + "qQ", 16
        else:
            phoff, = struct.unpack_from(end + "I", data, 0x1C)
            phentsize, phnum = struct.unpack_from(end + "HH", data, 0x2A)
            phdr = end + "IIIIIIII"  # type offset vaddr paddr filesz memsz flags align
            dyn, dynsize = end + "iI", 8
        loads, dynamic = [], None
        for i in range(phnum):
            h = struct.unpack_from(phdr, data, phoff + i * phentsize)
            if is64:
                ptype, offset, vaddr, filesz = h[0], h[2], h[3], h[5]
            else:
                ptype, offset, vaddr, filesz = h[0], h[1], h[2], h[4]
            if ptype == PT_LOAD:
                loads.append((vaddr, offset, filesz))
            elif ptype == PT_DYNAMIC:
                dynamic = (offset, filesz)
        if dynamic is None:
            sys.exit(f"set_soname: {path} has no dynamic section")
        entries = {}
        for pos in range(dynamic[0], dynamic[0] + dynamic[1], dynsize):
            tag, val = struct.unpack_from(dyn, data, pos)
            if tag == DT_NULL:
                break
            entries.setdefault(tag, val)
        if DT_SONAME not in entries or DT_STRTAB not in entries:
            sys.exit(f"set_soname: {path} has no SONAME (build.rs sets {old.decode()})")
        strtab = next((off + entries[DT_STRTAB] - va for va, off, size in loads
                       if va <= entries[DT_STRTAB] < va + size), None)
        if strtab is None:
            sys.exit(f"set_soname: {path}: .dynstr outside the loaded segments")
        at = strtab + entries[DT_SONAME]
        current = bytes(data[at:data.index(b"\0", at)])
        if current == new:
            return
        if current != old:
            sys.exit(f"set_soname: {path} has SONAME {current.decode()!r}, expected {old.decode()!r}")
        data[at:at + len(old)] = new + b"\0" * (len(old) - len(new))
        f.seek(0)
        f.write(data)


if __name__ == "__main__":
    main()
