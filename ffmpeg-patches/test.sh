#!/usr/bin/env bash
# Builds FFmpeg 7.1.5 (Debian source package) with ffmpeg-patches/ against
# vmaf-hip's library and checks the libvmaf filter on the parity clips.
#
#   ffmpeg-patches/test.sh                  build everything, run the CPU checks
#   ffmpeg-patches/test.sh --prebuilt DIR   only run the checks with DIR/bin/ffmpeg
#                                           (DIR/lib holds libvmaf.so.3)
#   ffmpeg-patches/test.sh --cuda-only      only (re)make the CUDA bundle (library
#                                           rebuilt, FFmpeg and inputs cached) and
#                                           check it (no GPU: clean failures)
#   VMAF_FFMPEG_CUDA=1 ffmpeg-patches/test.sh --prebuilt CUDA_BUNDLE
#                                           GPU machine: the libvmaf_cuda checks
#                                           (cuda_check.sh in the bundle)
#
# Environment:
#   VMAF_FFMPEG_CACHE       cache for the FFmpeg source and build, and the meson
#                           build directory of the library (default
#                           ~/.cache/vmaf-hip-ffmpeg)
#   CARGO_TARGET_DIR        where meson has cargo build the library and the CLI
#                           (default: the repository's target/, shared with
#                           `cargo build --release` and `cargo test --release`)
#   VMAF_FFMPEG_BUNDLE      where the relocatable ffmpeg + libvmaf.so.3 pair is
#                           copied after a build (default $VMAF_FFMPEG_CACHE/bundle)
#   VMAF_FFMPEG_HIP_DEVICE  GPU mode: run every check on the CPU and then with
#                           hip_device=N (+ a 1080p clip), expect the same scores
#                           (timings in the summary), and hip_device=99 to fail
#                           cleanly. Unset: CPU checks, and hip_device=0 must
#                           fail cleanly (a machine without GPU).
#   VMAF_FFMPEG_NOHIP       0: skip the second FFmpeg build (without
#                           --enable-libvmaf-hip) and its checks
#   VMAF_FFMPEG_STATIC      0: skip the third build, FFmpeg linked with
#                           libvmaf.a (pkg-config --static; bin/ffmpeg-static,
#                           also in the bundle, needing no libvmaf.so) and its
#                           checks (CPU, and GPU in GPU mode)
#   VMAF_FFMPEG_CUDA        the CUDA variant: an unmodified FFmpeg (Debian source,
#                           no patch) with ffnvcodec, NVDEC and libvmaf_cuda, plus
#                           H.264/HEVC inputs, bundled in VMAF_FFMPEG_CUDA_BUNDLE.
#                           auto (default): built when its prerequisites are
#                           there, else skipped with the reason; 0: skipped;
#                           1: required. With --prebuilt, 1 runs the CUDA checks
#                           (DIR is then a CUDA bundle) instead of the libvmaf ones.
#   VMAF_FFMPEG_CUDA_STATIC 1 (default): the CUDA variant links libvmaf.a
#                           (pkg-config --static), so its bundle needs no
#                           libvmaf.so; 0: linked with libvmaf.so.3 (in lib/)
#   VMAF_FFMPEG_CUDA_BUNDLE default $VMAF_FFMPEG_CACHE/bundle-cuda; packed beside
#                           it as bundle-cuda.tar.xz, what the GPU machine is sent
#   VMAF_FFMPEG_NVCODEC_HEADERS  prefix of nv-codec-headers (>= 12.1.14.0, or an
#                           11.1 >= 11.1.5.3 / 12.0 >= 12.0.16.1: FFmpeg 7.1's
#                           configure refuses bookworm's 11.1.5.2), i.e. with
#                           lib/pkgconfig/ffnvcodec.pc. Unset: ffnvcodec from
#                           pkg-config if recent enough, else Debian trixie's
#                           nv-codec-headers source package (cached), else skip.
#                           From GitHub: git clone
#                           https://github.com/FFmpeg/nv-codec-headers -b n12.1.14.0
#                           && make -C nv-codec-headers install PREFIX=DIR
#   VMAF_FFMPEG_ENCODER     an ffmpeg with libx264 and libx265 to encode the CUDA
#                           inputs (default: ffmpeg on PATH; apt-get install ffmpeg)
#   VMAF_FFMPEG_NVCC        clang that compiles scale_cuda's PTX (cuda_llvm;
#                           default: clang, clang-19 ... clang-14 on PATH)
#   VMAF_FFMPEG_JOBS        make -j (default 2)
#   VMAF_FFMPEG_KEEP        1: keep the temporary work directory
#
# Exit status 0 when every check passed.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$HERE")
CACHE=${VMAF_FFMPEG_CACHE:-$HOME/.cache/vmaf-hip-ffmpeg}
BUNDLE=${VMAF_FFMPEG_BUNDLE:-$CACHE/bundle}
JOBS=${VMAF_FFMPEG_JOBS:-2}
HIP_DEVICE=${VMAF_FFMPEG_HIP_DEVICE:-}
DEB_VERSION='7:7.1.5-0+deb13u1'
DEB_SUITE=trixie
PREBUILT=
CUDA=${VMAF_FFMPEG_CUDA:-auto}
CUDA_BUNDLE=${VMAF_FFMPEG_CUDA_BUNDLE:-$CACHE/bundle-cuda}
CUDA_ONLY=0
CUDA_STATIC=${VMAF_FFMPEG_CUDA_STATIC:-1}
NVCODEC_DEB_VERSION=12.1.14.0-1
# The packed CUDA bundle travels to the GPU machine beside the source tree
# (about 40 MiB), and the two must fit the 64 MiB the machine accepts.
CUDA_PACK_MIB=24

while [ $# -gt 0 ]; do
    case $1 in
    --prebuilt) PREBUILT=$(cd "$2" && pwd); shift 2 ;;
    --cuda-only) CUDA_ONLY=1; shift ;;
    -h|--help) sed -n '2,55p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
    esac
done
case $HIP_DEVICE in ''|[0-9]|[0-9][0-9]) ;; *) echo "bad VMAF_FFMPEG_HIP_DEVICE" >&2; exit 2 ;; esac
case $CUDA in auto|0|1) ;; *) echo "bad VMAF_FFMPEG_CUDA (auto, 0 or 1)" >&2; exit 2 ;; esac
[ $CUDA_ONLY = 1 ] && [ "$CUDA" = 0 ] && { echo "--cuda-only with VMAF_FFMPEG_CUDA=0" >&2; exit 2; }

# GPU machine: the CUDA bundle carries its own checker
if [ -n "$PREBUILT" ] && [ "$CUDA" = 1 ]; then
    exec "$HERE/cuda_check.sh" "$PREBUILT"
fi

mkdir -p "$CACHE"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/vmaf-hip-ffmpeg.XXXXXX")
cleanup() { [ "${VMAF_FFMPEG_KEEP:-0}" = 1 ] && echo "work directory kept: $WORK" || rm -rf "$WORK"; }
trap cleanup EXIT

T0=$(date +%s)
RESULTS=()
FAILED=0
log()  { printf '[%4ds] %s\n' $(($(date +%s) - T0)) "$*"; }
pass() { RESULTS+=("PASS  $1"); log "PASS  $1"; }
fail() { RESULTS+=("FAIL  $1"); log "FAIL  $1"; FAILED=1; }
die()  { fail "$1"; summary; exit 1; }
summary() {
    echo
    echo "================ FFmpeg libvmaf filter (vmaf-hip) ================"
    [ ${#RESULTS[@]} -gt 0 ] && printf '%s\n' "${RESULTS[@]}"
    echo "-------------------------------------------------------------------"
    if [ $FAILED = 0 ]; then echo "ALL PASSED ($(($(date +%s) - T0)) s)"; else echo "FAILED ($(($(date +%s) - T0)) s)"; fi
}
# Runs a build step in a subshell with errexit in force (a function called
# from an `if` would run without it), its output in a log file whose tail is
# shown on failure.
step() {
    local name=$1 logf="$WORK/$1.log"; shift
    log "$name ... (log: $logf)"
    ("$@") >"$logf" 2>&1 &
    if wait $!; then
        return 0
    fi
    tail -n 40 "$logf"
    # the optional CUDA variant is skipped, not failed, on a missing prerequisite
    [ "${STEP_SOFT:-0}" = 1 ] && return 1
    die "$name (log above: $logf)"
}

# ---------------------------------------------------------------- libvmaf_hip

PREFIX="$WORK/prefix"

build_library() {
    local b="$CACHE/meson-$(printf %s "$ROOT" | sha1sum | cut -c1-10)"
    # The cargo build happens in the shared target directory (meson's default),
    # not in the build directory: drop what older versions of this script kept.
    rm -rf "$b/cargo-target"
    if [ -f "$b/build.ninja" ]; then
        # --reconfigure: regenerates from a changed meson.build (targets added or renamed)
        meson setup --reconfigure "$b" "$ROOT" -Dprefix="$PREFIX" -Dlibdir=lib -Dlibvmaf_compat=true -Dcargo_target_dir=
    else
        rm -rf "$b"
        meson setup "$b" "$ROOT" --prefix="$PREFIX" --libdir=lib --buildtype=release -Dlibvmaf_compat=true
    fi
    meson compile -C "$b" libvmaf_hip vmaf_tool
    meson install -C "$b" --no-rebuild
    [ -e "$PREFIX/lib/pkgconfig/libvmaf.pc" ] && [ -e "$PREFIX/include/libvmaf/libvmaf_hip.h" ] &&
        [ -e "$PREFIX/lib/libvmaf.so.3" ]
}

# A pkg-config directory for linking libvmaf.a alone: libvmaf.pc with its
# libdir moved to a directory that holds only the archive.
STATIC_PC="$WORK/static/pkgconfig"
make_static_pc() {
    mkdir -p "$STATIC_PC" "$WORK/static/lib"
    cp -L "$PREFIX/lib/libvmaf.a" "$WORK/static/lib/"
    sed "s|^libdir=.*|libdir=$WORK/static/lib|" "$PREFIX/lib/pkgconfig/libvmaf.pc" \
        >"$STATIC_PC/libvmaf.pc"
    grep -q '^Libs.private:.*-lpthread' "$STATIC_PC/libvmaf.pc"
}

# $1: ffmpeg binary linked with libvmaf.a: no libvmaf among the libraries it
# loads (NEEDED or what ldd resolves), the library's code inside it.
check_static_binary() {
    local bin=$1 needed
    needed=$(readelf -d "$bin" | grep NEEDED | grep -o '\[.*\]' | tr -d '[]' | xargs)
    if ldd "$bin" | grep -q libvmaf || echo "$needed" | grep -q libvmaf; then
        fail "$(basename "$bin"): loads a libvmaf: NEEDED $needed"
    elif ! grep -q VMAF_HIP_VENDOR "$bin"; then
        fail "$(basename "$bin"): no vmaf-hip code linked in"
    else
        pass "$(basename "$bin"): $(du -k "$bin" | cut -f1) KiB, libvmaf.a linked in, NEEDED $needed"
    fi
}

# ---------------------------------------------------------------- FFmpeg source

# Writes a deb-src list for $DEB_SUITE built from this machine's apt sources
# (URIs and Signed-By of the deb entries; security archives get the -security
# suite). $1: keyring to force instead of each entry's Signed-By (may be empty).
write_src_list() {
    python3 - "$DEB_SUITE" "${1:-}" <<'EOF'
import glob, os, re, sys
suite, force_key = sys.argv[1], sys.argv[2]
entries = []  # (uri, suites, signed_by)
for path in sorted(glob.glob("/etc/apt/sources.list.d/*.sources")):
    for stanza in re.split(r"\n\s*\n", open(path).read()):
        fields, key = {}, None
        for line in stanza.splitlines():
            if line.startswith("#") or not line.strip():
                continue
            if line[0].isspace() and key:
                fields[key] += " " + line.strip()
                continue
            key, _, value = line.partition(":")
            key = key.strip().lower()
            fields[key] = value.strip()
        if "deb" not in fields.get("types", "").split():
            continue
        if fields.get("enabled", "yes").lower() == "no":
            continue
        for uri in fields.get("uris", "").split():
            entries.append((uri, fields.get("suites", "").split(), fields.get("signed-by", "")))
lists = ["/etc/apt/sources.list"] + sorted(glob.glob("/etc/apt/sources.list.d/*.list"))
for path in lists:
    if not os.path.exists(path):
        continue
    for line in open(path):
        m = re.match(r"\s*deb\s+(\[[^\]]*\]\s+)?(\S+)\s+(\S+)", line)
        if not m:
            continue
        opts = dict(o.split("=", 1) for o in (m.group(1) or "").strip("[] \n").split() if "=" in o)
        entries.append((m.group(2), [m.group(3)], opts.get("signed-by", "")))
seen = set()
for uri, suites, signed_by in entries:
    security = any(s.endswith("-security") or "/updates" in s for s in suites)
    target = suite + "-security" if security else suite
    if (uri, target) in seen:
        continue
    seen.add((uri, target))
    print("Types: deb-src")
    print("URIs: " + uri)
    print("Suites: " + target)
    print("Components: main")
    key = force_key or signed_by
    if key:
        print("Signed-By: " + key)
    print()
if not seen:
    sys.exit("no deb entries in /etc/apt/sources.list{,.d/}")
EOF
}

apt_opts() {
    echo "-o Dir::Etc::SourceList=$WORK/apt/src.sources -o Dir::Etc::SourceParts=/dev/null" \
         "-o Dir::State::Lists=$WORK/apt/lists -o Dir::Cache=$WORK/apt/cache" \
         "-o Dir::State::Status=/var/lib/dpkg/status -o Debug::NoLocking=1 $*"
}

# Tries the machine's own keys, then debian-archive-keyring (all Debian release
# keys) without the Valid-Until check. Writes what worked to $WORK/apt/how and
# the extra apt options it needed to $WORK/apt/extra.
apt_update_source_index() {
    local extra
    mkdir -p "$WORK/apt/lists/partial" "$WORK/apt/cache/archives/partial"
    for attempt in own archive-keyring; do
        extra=
        if [ $attempt = own ]; then
            write_src_list "" >"$WORK/apt/src.sources" || return 1
        else
            write_src_list /usr/share/keyrings/debian-archive-keyring.gpg >"$WORK/apt/src.sources" || return 1
            extra="-o Acquire::Check-Valid-Until=false"
        fi
        echo "== deb-src list ($attempt):"; cat "$WORK/apt/src.sources"
        # shellcheck disable=SC2046
        if apt-get $(apt_opts $extra) update &&
           apt-cache $(apt_opts $extra) showsrc ffmpeg | grep -x "Version: $DEB_VERSION" >/dev/null; then
            echo "$attempt${extra:+ ($extra)}" >"$WORK/apt/how"
            echo "$extra" >"$WORK/apt/extra"
            return 0
        fi
    done
    return 1
}

# $1 source package, $2 version, $3 directory (in the cache) for its files;
# fetched once (the index update once per run).
fetch_deb_source() {
    local pkg=$1 version=$2 dir=$3 dsc="$3/$1_${2#*:}.dsc"
    if [ -f "$dsc" ]; then
        log "$pkg source: cached $dsc"
        return 0
    fi
    if [ ! -f "$WORK/apt/how" ]; then
        step apt-update apt_update_source_index || return 1
        pass "apt: deb-src index for $DEB_SUITE verified with keys: $(cat "$WORK/apt/how")"
    fi
    rm -rf "$dir.tmp" && mkdir -p "$dir.tmp"
    # shellcheck disable=SC2046
    step "apt-source-$pkg" sh -c "cd '$dir.tmp' && apt-get $(apt_opts "$(cat "$WORK/apt/extra")") source --download-only '$pkg=$version'" || return 1
    rm -rf "$dir" && mv "$dir.tmp" "$dir"
    [ -f "$dsc" ] || { fail "apt-get source did not produce $dsc"; return 1; }
}

fetch_source() {
    fetch_deb_source ffmpeg "$DEB_VERSION" "$CACHE/src"
}

# ---------------------------------------------------------------- FFmpeg build

FF_CONFIGURE=(
    --disable-everything --disable-autodetect --disable-doc --disable-debug
    --disable-network --disable-x86asm --disable-programs --enable-ffmpeg
    --disable-avdevice --disable-swresample
    --enable-protocol=file,pipe
    --enable-demuxer=yuv4mpegpipe,rawvideo
    --enable-decoder=rawvideo
    --enable-encoder=wrapped_avframe
    --enable-muxer=null
    --enable-filter=libvmaf,scale,format,null
    --enable-libvmaf
    --disable-iconv
    # RUNPATH $ORIGIN/../lib, so bin/ffmpeg finds lib/libvmaf.so.3 wherever
    # the pair is copied. configure evaluates the value once inside double
    # quotes and make once more: config.mak must get \$$ORIGIN.
    '--extra-ldexeflags=-Wl,--enable-new-dtags,-rpath,\\\$\$ORIGIN/../lib'
)

patch_files() {
    grep -v '^\s*\(#\|$\)' "$HERE/series" | sed "s|^|$HERE/|"
}

# $1: variant (hip or nohip)
build_key() {
    { echo "$1 $DEB_VERSION"; printf '%s\n' "${FF_CONFIGURE[@]}"; cat "$HERE/series";
      patch_files | xargs cat; cat "$ROOT"/include/libvmaf/*.h; } | sha256sum | cut -c1-16
}

# Extracts the source package into a git repository and applies the series:
# each patch must apply with `patch -p1` (checked on the pristine tree) and
# with `git am` (which makes the commits).
prepare_tree() {
    local tree=$1 p
    rm -rf "$tree"
    dpkg-source --no-copy -x "$CACHE/src/ffmpeg_${DEB_VERSION#*:}.dsc" "$tree"
    cd "$tree"
    for p in $(patch_files); do
        patch -p1 --dry-run --batch <"$p"
    done
    export GIT_AUTHOR_NAME=vmaf-hip GIT_AUTHOR_EMAIL=vmaf-hip@localhost
    export GIT_COMMITTER_NAME=vmaf-hip GIT_COMMITTER_EMAIL=vmaf-hip@localhost
    git init -q .
    git add -A -f .
    git commit -q -m "FFmpeg $DEB_VERSION (Debian source package)"
    # shellcheck disable=SC2046
    git am -q $(patch_files)
    git log --oneline
}

# $1: tree, $2: variant: hip (--enable-libvmaf-hip), nohip (plain libvmaf) or
# static (--enable-libvmaf-hip against libvmaf.a: `pkg-config --static` adds
# the library's system libraries, and the .pc of $STATIC_PC names a directory
# holding only the archive, so nothing can pick libvmaf.so)
configure_ffmpeg() {
    local hip=0 pc="$PREFIX/lib/pkgconfig"
    cd "$1"
    if [ "$2" = hip ]; then
        hip=1
        set -- --enable-libvmaf-hip
    elif [ "$2" = static ]; then
        hip=1
        pc=$STATIC_PC
        set -- --enable-libvmaf-hip --pkg-config-flags=--static
    else
        set --
    fi
    PKG_CONFIG_PATH="$pc${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}" \
        ./configure "${FF_CONFIGURE[@]}" "$@"
    grep "^#define CONFIG_LIBVMAF_HIP $hip\$" config.h
    grep -q '^#define CONFIG_LIBVMAF_FILTER 1' config_components.h
    grep -F 'rpath,\$$ORIGIN/../lib' ffbuild/config.mak
}

# $1: variant (hip, nohip or static); installs $PREFIX/bin/ffmpeg, ffmpeg-nohip
# or ffmpeg-static
build_ffmpeg() {
    local variant=$1 key tree bin=ffmpeg
    [ "$variant" = nohip ] && bin=ffmpeg-nohip
    [ "$variant" = static ] && bin=ffmpeg-static
    key=$(build_key "$variant")
    tree="$CACHE/ffmpeg-$variant-$key"
    if [ -x "$tree/ffmpeg" ] && [ -f "$tree/.vmaf-hip-built" ]; then
        log "FFmpeg ($variant): cached build $tree"
        if [ "$variant" = static ]; then
            # the library is inside the binary: link it again with this libvmaf.a (configured
            # again first: the headers' directory is this run's prefix)
            step "ffmpeg-$variant-reconfigure" configure_ffmpeg "$tree" "$variant"
            rm -f "$tree/ffmpeg" "$tree/ffmpeg_g"
            step "ffmpeg-$variant-relink" make -C "$tree" -j"$JOBS" ffmpeg
        fi
    else
        rm -rf "$CACHE/ffmpeg-$variant-"*
        step "ffmpeg-$variant-patch" prepare_tree "$tree"
        step "ffmpeg-$variant-configure" configure_ffmpeg "$tree" "$variant"
        step "ffmpeg-$variant-make" make -C "$tree" -j"$JOBS" ffmpeg
        touch "$tree/.vmaf-hip-built"
    fi
    mkdir -p "$PREFIX/bin"
    cp "$tree/ffmpeg" "$PREFIX/bin/$bin"
}

# ---------------------------------------------------------------- CUDA variant
#
# FFmpeg's libvmaf_cuda filter, unmodified: our patch changes code that
# libvmaf_cuda runs too (the shared option table, init_cuda(), uninit()), so
# this variant is built from the pristine Debian source (Debian carries no
# patches for FFmpeg 7.1.5), whose libavfilter/vf_libvmaf.c is checked to be
# upstream's release tarball's. Its libvmaf filter, on the CPU with our
# library, is the reference in the checks.

FF_CUDA_CONFIGURE=(
    --disable-everything --disable-autodetect --disable-doc --disable-debug
    --disable-network --disable-x86asm --disable-programs --enable-ffmpeg
    --disable-avdevice --disable-swresample
    --enable-protocol=file,pipe
    --enable-demuxer=yuv4mpegpipe,rawvideo,mov,h264,hevc
    --enable-parser=h264,hevc
    --enable-decoder=rawvideo,h264,hevc
    --enable-encoder=wrapped_avframe
    --enable-muxer=null
    --enable-filter=libvmaf,libvmaf_cuda,hwupload_cuda,hwdownload,scale,format,null,crop
    --enable-ffnvcodec --enable-cuda --enable-nvdec --enable-hwaccel=h264_nvdec,hevc_nvdec
    --enable-libvmaf
    --disable-iconv
    '--extra-ldexeflags=-Wl,--enable-new-dtags,-rpath,\\\$\$ORIGIN/../lib'
)
# scale_cuda (NVDEC gives nv12/p010, libvmaf_cuda takes yuv420p/yuv444p16)
# needs its kernels compiled to PTX: clang does that without the CUDA toolkit
# (cuda_llvm; FFmpeg's compat/cuda headers stand in for CUDA's).
FF_CUDA_SCALE=(--enable-filter=scale_cuda --enable-cuda-llvm)

# encoded inputs: name codec clip kind (cuda_check.sh's inputs/list)
CUDA_INPUTS='h264_natural_576x324 h264 natural_576x324_420p8 parity
hevc_natural_576x324 hevc natural_576x324_420p8 parity
h264_life_320x240 h264 life_320x240_420p8 parity
hevc_life_320x240 hevc life_320x240_420p8 parity
hevc10_natural_640x360 hevc natural_640x360_420p10 10bit
h264_natural_1920x1080_x75 h264 natural_1920x1080_420p8 throughput'
# A throughput input is its clip played this many times in a row, encoded as
# one long stream (8 frames x 75 = 600): looping the short input at run time
# (-stream_loop) restarts NVDEC, and FFmpeg 7.1 then fails reconfiguring the
# filter graph (auto_scale_0: "Impossible to convert between the formats").
THROUGHPUT_LOOPS=75
# near-lossless, but real encodes
X264_OPTS=(-c:v libx264 -preset medium -crf 18 -pix_fmt yuv420p)
X265_OPTS=(-c:v libx265 -preset medium -crf 20 -tag:v hvc1 -x265-params log-level=error)
# the throughput pair at crf 23: 600 frames at crf 18 make ~17 MB (the noisy
# distorted clip), too much for the packed bundle's 24 MiB (see CUDA_PACK_MIB)
X264_TP_OPTS=(-c:v libx264 -preset medium -crf 23 -pix_fmt yuv420p)

cuda_skip() {
    if [ "$CUDA" = 1 ]; then
        fail "CUDA variant: $1"
    else
        RESULTS+=("SKIP  CUDA variant: $1")
        log "SKIP  CUDA variant: $1"
    fi
}

NVCODEC_PC=   # directory with the ffnvcodec.pc to use ("" = pkg-config's own)
NVCODEC_VERSION=
# $1: directory for PKG_CONFIG_PATH or "". Prints ffnvcodec's version; fails
# when there is none or FFmpeg 7.1's configure would refuse it.
ffnvcodec_ok() {
    PKG_CONFIG_PATH="$1${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}" python3 -c '
import subprocess, sys
try:
    v = subprocess.run(["pkg-config", "--modversion", "ffnvcodec"], capture_output=True,
                       text=True, check=True).stdout.strip()
    t = tuple(int(x) for x in v.split("."))
except Exception:
    sys.exit(1)
print(v)
# the ranges of configure'"'"'s check_pkg_config ffnvcodec lines
ok = (t >= (12, 1, 14, 0) or (12, 0, 16, 1) <= t < (12, 1) or (11, 1, 5, 3) <= t < (12, 0)
      or (11, 0, 10, 3) <= t < (11, 1) or (8, 1, 24, 15) <= t < (8, 2))
sys.exit(0 if ok else 2)'
}

find_nvcodec() {
    local v dir src orig
    if [ -n "${VMAF_FFMPEG_NVCODEC_HEADERS:-}" ]; then
        NVCODEC_PC="$VMAF_FFMPEG_NVCODEC_HEADERS/lib/pkgconfig"
        if ! NVCODEC_VERSION=$(ffnvcodec_ok "$NVCODEC_PC"); then
            cuda_skip "VMAF_FFMPEG_NVCODEC_HEADERS=$VMAF_FFMPEG_NVCODEC_HEADERS: no ffnvcodec.pc there that FFmpeg 7.1 accepts (${NVCODEC_VERSION:-none})"
            return 1
        fi
        log "nv-codec-headers $NVCODEC_VERSION: $VMAF_FFMPEG_NVCODEC_HEADERS"
        return 0
    fi
    if v=$(ffnvcodec_ok ""); then
        NVCODEC_PC= NVCODEC_VERSION=$v
        log "nv-codec-headers $v: pkg-config (system)"
        return 0
    fi
    [ -n "$v" ] && log "system ffnvcodec $v is too old for FFmpeg 7.1's configure"
    dir="$CACHE/nv-codec-headers-$NVCODEC_DEB_VERSION"
    if [ ! -f "$dir/lib/pkgconfig/ffnvcodec.pc" ]; then
        # Only the upstream tarball is needed (headers, Makefile, .pc): apt
        # checks its hash against the signed index even when another file of
        # the source package cannot be fetched (a mirror lacking the
        # .debian.tar.xz, seen here), so such a failure is not fatal.
        orig="$CACHE/src-nv-codec-headers/nv-codec-headers_${NVCODEC_DEB_VERSION%-*}.orig.tar.xz"
        if [ ! -f "$orig" ]; then
            STEP_SOFT=1 fetch_deb_source nv-codec-headers "$NVCODEC_DEB_VERSION" "$CACHE/src-nv-codec-headers" || true
            if [ -f "$CACHE/src-nv-codec-headers.tmp/$(basename "$orig")" ]; then
                rm -rf "$CACHE/src-nv-codec-headers"
                mv "$CACHE/src-nv-codec-headers.tmp" "$CACHE/src-nv-codec-headers"
            fi
        fi
        if [ ! -f "$orig" ]; then
            cuda_skip "no nv-codec-headers: apt-get source nv-codec-headers=$NVCODEC_DEB_VERSION ($DEB_SUITE) failed; set VMAF_FFMPEG_NVCODEC_HEADERS (see the head of $0)"
            return 1
        fi
        src="$WORK/nv-codec-headers"
        if ! STEP_SOFT=1 step nv-codec-headers-install sh -c "rm -rf '$src' '$dir' && mkdir -p '$src' &&
            tar -xJf '$orig' -C '$src' --strip-components=1 &&
            make -C '$src' install PREFIX='$dir'"; then
            cuda_skip "nv-codec-headers $NVCODEC_DEB_VERSION did not install"
            return 1
        fi
    fi
    NVCODEC_PC="$dir/lib/pkgconfig"
    if ! NVCODEC_VERSION=$(ffnvcodec_ok "$NVCODEC_PC"); then
        cuda_skip "$dir: unusable ffnvcodec.pc"
        return 1
    fi
    log "nv-codec-headers $NVCODEC_VERSION: $dir (Debian $DEB_SUITE source package)"
}

find_clang() {
    local c
    for c in ${VMAF_FFMPEG_NVCC:-clang clang-19 clang-18 clang-17 clang-16 clang-15 clang-14}; do
        if command -v "$c" >/dev/null; then
            echo "$c"
            return 0
        fi
    done
    return 1
}

ENCODER=${VMAF_FFMPEG_ENCODER:-ffmpeg}
check_encoder() {
    local encs
    if ! command -v "$ENCODER" >/dev/null; then
        cuda_skip "no '$ENCODER' to encode the H.264/HEVC inputs (apt-get install ffmpeg, or set VMAF_FFMPEG_ENCODER)"
        return 1
    fi
    encs=$("$ENCODER" -hide_banner -encoders 2>/dev/null || true)
    if ! echo "$encs" | grep -q ' libx264 ' || ! echo "$encs" | grep -q ' libx265 '; then
        cuda_skip "$ENCODER has no libx264/libx265 encoder (set VMAF_FFMPEG_ENCODER)"
        return 1
    fi
}

# $1: tree, $2: clang or empty
# ./configure in the current tree with the CUDA variant's switches, scale_cuda when $1 (clang)
# is set, against our libvmaf.pc (the archive's with CUDA_STATIC=1), plus $2...
run_cuda_configure() {
    local nvcc=$1 pc="$PREFIX/lib/pkgconfig"
    shift
    [ -n "$nvcc" ] && set -- "$@" "${FF_CUDA_SCALE[@]}" "--nvcc=$nvcc"
    if [ "$CUDA_STATIC" = 1 ]; then
        # libvmaf.a inside the binary, as a static FFmpeg build ships it
        pc=$STATIC_PC
        set -- "$@" --pkg-config-flags=--static
    fi
    PKG_CONFIG_PATH="$pc${NVCODEC_PC:+:$NVCODEC_PC}${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}" \
        ./configure "${FF_CUDA_CONFIGURE[@]}" "$@"
}

configure_ffmpeg_cuda() {
    local tree=$1 nvcc=$2 orig
    cd "$tree"
    # unmodified: no Debian patch, and the filter's source is the release's
    if [ -f debian/patches/series ] && grep -qv '^\s*\(#\|$\)' debian/patches/series; then
        echo "debian/patches/series is not empty"
        return 1
    fi
    orig=$(ls "$CACHE"/src/ffmpeg_*.orig.tar.xz)
    tar -xJOf "$orig" "ffmpeg-$(echo "${DEB_VERSION#*:}" | sed 's/-.*//')/libavfilter/vf_libvmaf.c" | cmp - libavfilter/vf_libvmaf.c
    echo "libavfilter/vf_libvmaf.c: identical to $(basename "$orig")'s"
    run_cuda_configure "$nvcc"
    # configure's own probe for the filter (check_pkg_config libvmaf_cuda
    # "libvmaf >= 2.0.0" libvmaf_cuda.h vmaf_cuda_state_init), against our
    # libvmaf.pc; what it enabled
    grep -F 'check_pkg_config libvmaf_cuda' ffbuild/config.log
    grep '^#define CONFIG_LIBVMAF_CUDA_FILTER 1$' config_components.h
    grep '^#define CONFIG_LIBVMAF_FILTER 1$' config_components.h
    grep '^#define CONFIG_HWUPLOAD_CUDA_FILTER 1$' config_components.h
    grep '^#define CONFIG_H264_NVDEC_HWACCEL 1$' config_components.h
    grep '^#define CONFIG_HEVC_NVDEC_HWACCEL 1$' config_components.h
    if [ -n "$nvcc" ]; then grep '^#define CONFIG_SCALE_CUDA_FILTER 1$' config_components.h; fi
    grep -F 'rpath,\$$ORIGIN/../lib' ffbuild/config.mak
}

# $1: clang (or "none")
cuda_build_key() {
    { echo "cuda $DEB_VERSION $NVCODEC_VERSION $1 static=$CUDA_STATIC"
      [ "$1" = none ] || "$1" --version 2>/dev/null | head -n 1
      printf '%s\n' "${FF_CUDA_CONFIGURE[@]}" "${FF_CUDA_SCALE[@]}"
      cat "$ROOT"/include/libvmaf/*.h; } | sha256sum | cut -c1-16
}

# installs $PREFIX/bin/ffmpeg-cuda; CUDA_SCALE=1 when scale_cuda is in it
CUDA_SCALE=0
build_ffmpeg_cuda() {
    local nvcc key tree
    nvcc=$(find_clang) || nvcc=
    CUDA_SCALE=1
    if [ -z "$nvcc" ]; then
        CUDA_SCALE=0
        RESULTS+=("NOTE  CUDA variant: no clang to compile scale_cuda's PTX (cuda_llvm): without scale_cuda NVDEC's nv12 frames cannot reach libvmaf_cuda, only uploaded ones")
    fi
    [ "$CUDA_STATIC" = 1 ] && [ ! -f "$STATIC_PC/libvmaf.pc" ] && step static-pc make_static_pc
    key=$(cuda_build_key "${nvcc:-none}")
    tree="$CACHE/ffmpeg-cuda-$key"
    if [ -x "$tree/ffmpeg" ] && [ -f "$tree/.vmaf-hip-built" ]; then
        log "FFmpeg (cuda): cached build $tree"
        if [ "$CUDA_STATIC" = 1 ]; then
            # configured again: the headers' directory is this run's prefix (config.h stays,
            # so only what includes the library's headers is compiled again)
            STEP_SOFT=1 step ffmpeg-cuda-reconfigure configure_ffmpeg_cuda "$tree" "$nvcc" || return 1
            rm -f "$tree/ffmpeg" "$tree/ffmpeg_g"
            STEP_SOFT=1 step ffmpeg-cuda-relink make -C "$tree" -j"$JOBS" ffmpeg || return 1
        fi
    else
        rm -rf "$CACHE/ffmpeg-cuda-"*
        STEP_SOFT=1 step ffmpeg-cuda-extract \
            dpkg-source --no-copy -x "$CACHE/src/ffmpeg_${DEB_VERSION#*:}.dsc" "$tree" || return 1
        STEP_SOFT=1 step ffmpeg-cuda-configure configure_ffmpeg_cuda "$tree" "$nvcc" || return 1
        STEP_SOFT=1 step ffmpeg-cuda-make make -C "$tree" -j"$JOBS" ffmpeg || return 1
        grep -F -e 'check_pkg_config libvmaf_cuda' -e 'identical to' "$WORK/ffmpeg-cuda-configure.log" \
            >"$tree/.vmaf-hip-configure.txt" || true
        touch "$tree/.vmaf-hip-built"
    fi
    cat "$tree/.vmaf-hip-configure.txt" 2>/dev/null || true
    mkdir -p "$PREFIX/bin"
    cp "$tree/ffmpeg" "$PREFIX/bin/ffmpeg-cuda"
    # the patched one: a failure is one, but the unmodified checks still run
    if ! build_ffmpeg_cuda_hip "$nvcc"; then
        fail "CUDA variant: the patched FFmpeg (bin/ffmpeg-hip) did not build (log above)"
        rm -f "$PREFIX/bin/ffmpeg-cuda-hip"
    fi
}

# The patched FFmpeg with the same CUDA configuration and --enable-libvmaf-hip:
# the libvmaf filter scoring NVDEC's CUDA frames in place (hip_device).
# $1: clang (or empty); installs $PREFIX/bin/ffmpeg-cuda-hip
build_ffmpeg_cuda_hip() {
    local nvcc=$1 key tree
    key=$({ echo hip; cuda_build_key "${nvcc:-none}"; patch_files | xargs cat; } | sha256sum | cut -c1-16)
    tree="$CACHE/ffmpeg-cudahip-$key"
    if [ -x "$tree/ffmpeg" ] && [ -f "$tree/.vmaf-hip-built" ]; then
        log "FFmpeg (cuda, patched): cached build $tree"
        if [ "$CUDA_STATIC" = 1 ]; then
            STEP_SOFT=1 step ffmpeg-cudahip-reconfigure configure_ffmpeg_cuda_hip "$tree" "$nvcc" || return 1
            rm -f "$tree/ffmpeg" "$tree/ffmpeg_g"
            STEP_SOFT=1 step ffmpeg-cudahip-relink make -C "$tree" -j"$JOBS" ffmpeg || return 1
        fi
    else
        rm -rf "$CACHE/ffmpeg-cudahip-"*
        STEP_SOFT=1 step ffmpeg-cudahip-patch prepare_tree "$tree" || return 1
        STEP_SOFT=1 step ffmpeg-cudahip-configure configure_ffmpeg_cuda_hip "$tree" "$nvcc" || return 1
        STEP_SOFT=1 step ffmpeg-cudahip-make make -C "$tree" -j"$JOBS" ffmpeg || return 1
        touch "$tree/.vmaf-hip-built"
    fi
    cp "$tree/ffmpeg" "$PREFIX/bin/ffmpeg-cuda-hip"
}

configure_ffmpeg_cuda_hip() {
    cd "$1"
    run_cuda_configure "$2" --enable-libvmaf-hip
    grep '^#define CONFIG_LIBVMAF_HIP 1$' config.h
    grep '^#define CONFIG_CUDA 1$' config.h
    grep '^#define CONFIG_LIBVMAF_FILTER 1$' config_components.h
}

# encodes the inputs into $CACHE/cuda-inputs-<key>; sets CUDA_INPUT_DIR
CUDA_INPUT_DIR=
encode_cuda_inputs() {
    local key dir name codec clip kind side src opts loops
    key=$({ echo "$CUDA_INPUTS $THROUGHPUT_LOOPS"
            printf '%s\n' "${X264_OPTS[@]}" "${X265_OPTS[@]}" "${X264_TP_OPTS[@]}"
            "$ENCODER" -hide_banner -version | head -n 1
            cat "$ROOT"/tests/data/clips/*_natural_*.y4m.xz "$ROOT"/tests/data/clips/*_life_*.y4m.xz
          } | sha256sum | cut -c1-16)
    dir="$CACHE/cuda-inputs-$key"
    CUDA_INPUT_DIR=$dir
    if [ -f "$dir/list" ]; then
        log "CUDA inputs: cached $dir"
        return 0
    fi
    rm -rf "$CACHE/cuda-inputs-"* && mkdir -p "$dir.tmp"
    while read -r name codec clip kind; do
        case $codec-$kind in
        h264-throughput) opts=("${X264_TP_OPTS[@]}") ;;
        h264-*) opts=("${X264_OPTS[@]}") ;;
        hevc-10bit) opts=("${X265_OPTS[@]}" -pix_fmt yuv420p10le -profile:v main10) ;;
        *) opts=("${X265_OPTS[@]}" -pix_fmt yuv420p) ;;
        esac
        # -stream_loop needs a seekable input: the y4m in a file
        loops=1
        [ "$kind" = throughput ] && loops=$THROUGHPUT_LOOPS
        for side in ref dist; do
            src="$ROOT/tests/data/clips/${side}_$clip.y4m.xz"
            STEP_SOFT=1 step "encode-${name}_$side" sh -c 'src=$1 enc=$2 out=$3 loops=$4 y4m=$5; shift 5
                xz -dc "$src" >"$y4m" || exit 1
                "$enc" -nostdin -hide_banner -y -stream_loop $((loops - 1)) -f yuv4mpegpipe -i "$y4m" \
                    "$@" -an "$out"
                st=$?; rm -f "$y4m"; exit $st' \
                sh "$src" "$ENCODER" "$dir.tmp/${name}_$side.mp4" "$loops" "$WORK/encode-input.y4m" \
                "${opts[@]}" || return 1
        done
    done <<<"$CUDA_INPUTS"
    echo "$CUDA_INPUTS" >"$dir.tmp/list"
    mv "$dir.tmp" "$dir"
}

# bin/ffmpeg, lib/libvmaf.so.3, inputs/, clips/ (the parity clips' y4m.xz),
# expected/ (upstream libvmaf's logs of them), cuda_check.sh, vmaf_json_cmp.py
assemble_cuda_bundle() {
    local lib clip
    rm -rf "$CUDA_BUNDLE"
    mkdir -p "$CUDA_BUNDLE/bin" "$CUDA_BUNDLE/lib" "$CUDA_BUNDLE/clips" "$CUDA_BUNDLE/expected"
    cp "$PREFIX/bin/ffmpeg-cuda" "$CUDA_BUNDLE/bin/ffmpeg"
    if [ -x "$PREFIX/bin/ffmpeg-cuda-hip" ]; then
        cp "$PREFIX/bin/ffmpeg-cuda-hip" "$CUDA_BUNDLE/bin/ffmpeg-hip"
    fi
    for lib in $(readelf -d "$CUDA_BUNDLE/bin/ffmpeg" | sed -n 's/.*(NEEDED).*\[\(libvmaf[^]]*\)\].*/\1/p'); do
        cp -L "$PREFIX/lib/$lib" "$CUDA_BUNDLE/lib/"
    done
    cp -r "$CUDA_INPUT_DIR" "$CUDA_BUNDLE/inputs"
    for clip in $(echo "$CUDA_INPUTS" | awk '$4 == "parity" { print $3 }' | sort -u); do
        cp "$ROOT/tests/data/clips/ref_$clip.y4m.xz" "$ROOT/tests/data/clips/dist_$clip.y4m.xz" "$CUDA_BUNDLE/clips/"
        cp "$ROOT/tests/data/expected/$clip.json" "$CUDA_BUNDLE/expected/"
    done
    cp "$HERE/cuda_check.sh" "$HERE/vmaf_json_cmp.py" "$CUDA_BUNDLE/"
}

cuda_variant() {
    local sz line pack
    [ "$CUDA" = 0 ] && return 0
    check_encoder || return 0
    find_nvcodec || return 0
    # with its prerequisites there, a failure is one
    if ! build_ffmpeg_cuda; then
        fail "CUDA variant: FFmpeg build failed (log above)"
        return 0
    fi
    pass "FFmpeg $DEB_VERSION unmodified (no patch; vf_libvmaf.c is the release's), ffnvcodec $NVCODEC_VERSION: configure enabled libvmaf_cuda_filter with our libvmaf.pc$([ "$CUDA_SCALE" = 1 ] && echo ", scale_cuda (PTX by clang)")"
    if ! encode_cuda_inputs; then
        fail "CUDA variant: encoding the inputs failed (log above)"
        return 0
    fi
    pass "CUDA inputs (H.264 crf 18, HEVC crf 20, HEVC Main10 crf 20; throughput: the 1080p clip x$THROUGHPUT_LOOPS at crf 23, $(du -ck "$CUDA_INPUT_DIR"/*_x"$THROUGHPUT_LOOPS"_*.mp4 | tail -n 1 | cut -f1) KiB): $CUDA_INPUT_DIR"
    assemble_cuda_bundle
    if [ "$CUDA_STATIC" = 1 ]; then
        check_static_binary "$CUDA_BUNDLE/bin/ffmpeg"
    else
        check_binary "$CUDA_BUNDLE/bin/ffmpeg"
    fi
    # measured packed: the binaries compress threefold, the encoded inputs not at all
    pack="$CUDA_BUNDLE.tar.xz"
    if ! tar cf - -C "$(dirname "$CUDA_BUNDLE")" "$(basename "$CUDA_BUNDLE")" | xz -T0 -6 >"$pack.tmp"; then
        rm -f "$pack.tmp"
        fail "CUDA bundle: packing $CUDA_BUNDLE failed"
    else
        mv "$pack.tmp" "$pack"
        sz=$(du -k "$pack" | cut -f1)
        if [ "$sz" -le $((CUDA_PACK_MIB * 1024)) ]; then
            pass "CUDA bundle: $CUDA_BUNDLE ($(du -sk "$CUDA_BUNDLE" | cut -f1) KiB), packed $pack ($sz KiB)"
        else
            fail "CUDA bundle: $pack is $sz KiB (> $CUDA_PACK_MIB MiB: it and the source tree must fit the GPU machine's 64 MiB)"
        fi
    fi
    # the full checks where the NVIDIA driver has a device, else clean failures
    set -- --no-device
    [ -e /dev/nvidiactl ] && set --
    log "cuda_check.sh $* $CUDA_BUNDLE"
    "$CUDA_BUNDLE/cuda_check.sh" "$@" "$CUDA_BUNDLE" >"$WORK/cuda_check.log" 2>&1 || true
    sed '/^=====/,$d' "$WORK/cuda_check.log" | grep -v '^\[ *[0-9]*s\] \(PASS\|FAIL\|NOTE\)  ' || true
    while IFS= read -r line; do
        case $line in
        "PASS  "*) pass "cuda: ${line#PASS  }" ;;
        "FAIL  "*) fail "cuda: ${line#FAIL  }" ;;
        "NOTE  "*) RESULTS+=("NOTE  cuda: ${line#NOTE  }") ;;
        esac
    done < <(sed -n '/^=====/,$p' "$WORK/cuda_check.log")
    grep -q '^ALL PASSED' "$WORK/cuda_check.log" || fail "cuda_check.sh $* did not pass (log: $WORK/cuda_check.log)"
}

# ---------------------------------------------------------------- checks

FFMPEG=
SKIP_METRICS=float_ssim,float_ms_ssim,cambi

# $1 label, $2 clip, $3 filter options; runs $FF (default $FFMPEG) with
# stdout/stderr in $WORK/<label>.{out,err}. Sets RC to ffmpeg's exit status,
# or to "signal N" when it was killed (ffmpeg 7 exits with its AVERROR code
# modulo 256, so a shell's 128+N would be ambiguous).
run_filter() {
    local label=$1 clip=$2 opts=$3
    (ulimit -c 0; cd "$WORK" && python3 -c '
import subprocess, sys
r = subprocess.run(sys.argv[2:])
with open(sys.argv[1], "w") as f:
    f.write(f"signal {-r.returncode}" if r.returncode < 0 else str(r.returncode))
' "$WORK/$label.rc" "${FF:-$FFMPEG}" -nostdin -hide_banner -loglevel info \
        -i "$WORK/clips/dist_$clip.y4m" -i "$WORK/clips/ref_$clip.y4m" \
        -lavfi "libvmaf=$opts" -f null - >"$WORK/$label.out" 2>"$WORK/$label.err") || true
    RC=$(cat "$WORK/$label.rc" 2>/dev/null || echo "not run")
}

# GPU of the current run ("" = CPU)
CUR_DEV=
hip_opt() { [ -n "$CUR_DEV" ] && echo ":hip_device=$CUR_DEV" || true; }

# float_adm divides through the CPU's reciprocal estimate (RCPSS) plus a Newton
# step, as upstream's x86 build does; the float logs in tests/data come from an
# AMD host, and Intel's estimates differ in their last bits (tests/common/mod.rs,
# divides_as_reference_host). On other CPUs the values float_adm feeds are
# compared to 1e-5 (the float model's score to 1e-3) and the rest exactly.
FLOAT_ADM_METRICS=adm2,aim,adm3,adm_scale0,adm_scale1,adm_scale2,adm_scale3
reference_reciprocals() { grep -q '^vendor_id.*AuthenticAMD' /proc/cpuinfo; }

# $1 expected, $2 candidate: vmaf_json_cmp.py's verdict with the float rule
# above ("float" as $3), else exact.
compare_json() {
    local expected=$1 json=$2 near out
    if [ "${3:-}" != float ] || reference_reciprocals; then
        python3 "$HERE/vmaf_json_cmp.py" "$expected" "$json" --skip "$SKIP_METRICS"
        return
    fi
    near="$FLOAT_ADM_METRICS,vmaf"
    out=$(python3 "$HERE/vmaf_json_cmp.py" "$expected" "$json" --skip "$SKIP_METRICS,$near") &&
        python3 "$HERE/vmaf_json_cmp.py" "$expected" "$json" --only "$FLOAT_ADM_METRICS" \
            --tol 1e-5 --quiet &&
        python3 "$HERE/vmaf_json_cmp.py" "$expected" "$json" --only vmaf --tol 1e-3 --quiet &&
        { echo "$out" | sed '$d'; echo "$(echo "$out" | tail -n 1); float_adm values within 1e-5 (this CPU's reciprocal estimates)"; }
}

# $1 label, $2 clip, $3 expected json, $4 extra filter options, $5 "float" for
# a log with float_adm values (compare_json)
check_parity() {
    local label=$1 clip=$2 expected=$3 opts=$4 json="$WORK/$1.json" t
    t=$(date +%s%N)
    run_filter "$label" "$clip" "log_path=$json:log_fmt=json:$opts$(hip_opt)"
    t=$((($(date +%s%N) - t) / 1000000))
    if [ "$RC" != 0 ]; then
        tail -n 15 "$WORK/$label.err"
        fail "$label: ffmpeg exit status $RC: $(grep -m1 'could not\|problem\|rror' "$WORK/$label.err" | sed 's/^\[[^]]*\] //')"
        return
    fi
    if [ -n "$CUR_DEV" ] && ! grep -q "extracting features on GPU device $CUR_DEV" "$WORK/$label.err"; then
        fail "$label: no 'extracting features on GPU device $CUR_DEV' in the log"
        return
    fi
    local cmp
    if cmp=$(compare_json "$expected" "$json" "${5:-}" 2>&1); then
        pass "$label: $(echo "$cmp" | tail -n 1) ($(grep -o 'VMAF score: [0-9.]*' "$WORK/$label.err" | head -n 1), $t ms)"
    else
        echo "$cmp" | head -n 20
        fail "$label: $(echo "$cmp" | tail -n 1)"
    fi
}

# A filter that must fail to initialize: $1 label, $2 filter options, $3 the
# error it must print. Passes on a non-zero exit status (not a signal) with
# that error.
check_clean_failure() {
    local label=$1 opts=$2 want=$3 msg
    run_filter "$label" testsrc_480x270_444p8 "$opts"
    msg=$(grep -m1 -F "$want" "$WORK/$label.err" || true)
    if [ "$RC" = 0 ]; then
        fail "$label: ffmpeg succeeded (a GPU here? then run with VMAF_FFMPEG_HIP_DEVICE=0)"
    elif [ "${RC#signal}" != "$RC" ]; then
        tail -n 10 "$WORK/$label.err"
        fail "$label: ffmpeg crashed ($RC)"
    elif [ -z "$msg" ]; then
        tail -n 10 "$WORK/$label.err"
        fail "$label: exit status $RC but no '$want' error"
    else
        pass "$label: exit status $RC, \"${msg#*] }\""
    fi
}

# $1: ffmpeg binary; its libvmaf (NEEDED libvmaf.so.3, the library's SONAME,
# whether linked with -lvmaf or -lvmaf_hip) must be the one in ../lib.
check_binary() {
    local bin=$1 needed runpath resolved
    needed=$(readelf -d "$bin" | grep NEEDED | grep -o '\[.*\]' | tr -d '[]' | xargs)
    runpath=$(readelf -d "$bin" | grep -o 'R.*PATH.*\[.*\]' | grep -o '\[.*\]' || true)
    resolved=$(ldd "$bin" | sed -n 's/.*libvmaf[^ ]*\.so[^ ]* => \([^ ]*\) .*/\1/p' | head -n 1)
    if [ -z "$resolved" ] || [ "$(readlink -f "$(dirname "$resolved")")" != \
         "$(readlink -f "$(dirname "$bin")/../lib")" ]; then
        fail "$(basename "$bin"): libvmaf not found in ../lib: NEEDED $needed, RUNPATH $runpath, ${resolved:-not resolved}"
    else
        pass "$(basename "$bin"): $(du -k "$bin" | cut -f1) KiB, NEEDED $needed, RUNPATH $runpath"
    fi
}

# ---------------------------------------------------------------- main

for tool in python3 xz readelf ldd; do
    command -v $tool >/dev/null || die "missing tool: $tool"
done
[ -f "$HERE/series" ] || die "missing $HERE/series"

if [ -n "$PREBUILT" ]; then
    FFMPEG="$PREBUILT/bin/ffmpeg"
    [ -x "$FFMPEG" ] || die "no $FFMPEG"
    log "using prebuilt $FFMPEG"
else
    for tool in meson ninja cargo pkg-config make cc apt-get dpkg-source git patch; do
        command -v $tool >/dev/null || die "missing tool: $tool"
    done
    step libvmaf_hip-build build_library
    pass "libvmaf_hip: meson build + install into a temporary prefix"
    fetch_source
    if [ $CUDA_ONLY = 1 ]; then
        cuda_variant
        [ -d "$CUDA_BUNDLE" ] && log "CUDA bundle: $CUDA_BUNDLE ($(du -sh "$CUDA_BUNDLE" | cut -f1))"
        summary
        exit $FAILED
    fi
    build_ffmpeg hip
    pass "FFmpeg $DEB_VERSION: patched (patch -p1 and git am), built with --enable-libvmaf-hip"
    if [ "${VMAF_FFMPEG_NOHIP:-1}" != 0 ]; then
        build_ffmpeg nohip
        pass "FFmpeg $DEB_VERSION: patched, built without --enable-libvmaf-hip"
    fi
    if [ "${VMAF_FFMPEG_STATIC:-1}" != 0 ]; then
        step static-pc make_static_pc
        build_ffmpeg static
        pass "FFmpeg $DEB_VERSION: patched, linked with libvmaf.a (pkg-config --static)"
    fi
    FFMPEG="$PREFIX/bin/ffmpeg"
    rm -rf "$BUNDLE" && mkdir -p "$BUNDLE/bin" "$BUNDLE/lib"
    cp "$FFMPEG" "$BUNDLE/bin/"
    # a regular file under the name ffmpeg asks for (no symlinks to carry):
    # libvmaf.so.3 (an FFmpeg cached from before the SONAME change asks for
    # libvmaf_hip.so.3, also installed)
    for lib in $(readelf -d "$FFMPEG" | sed -n 's/.*(NEEDED).*\[\(libvmaf[^]]*\)\].*/\1/p'); do
        cp -L "$PREFIX/lib/$lib" "$BUNDLE/lib/"
    done
    # the static one needs no lib/ beside it
    [ -x "$PREFIX/bin/ffmpeg-static" ] && cp "$PREFIX/bin/ffmpeg-static" "$BUNDLE/bin/"
fi
check_binary "$FFMPEG"
if "$FFMPEG" -hide_banner -h filter=libvmaf 2>&1 | grep 'hip_device' >/dev/null; then
    pass "ffmpeg -h filter=libvmaf lists hip_device"
else
    fail "ffmpeg -h filter=libvmaf: no hip_device option"
fi

CLIPS="natural_576x324_420p8 natural_640x360_420p10 testsrc_480x270_444p8"
# GPU mode: every check on the CPU, then on the GPU (same machine, for the
# timings), plus a 1080p clip.
MODES=cpu
if [ -n "$HIP_DEVICE" ]; then
    CLIPS="$CLIPS natural_1920x1080_420p8"
    MODES="cpu gpu"
fi
mkdir -p "$WORK/clips"
for clip in $CLIPS; do
    for side in ref dist; do
        xz -dc "$ROOT/tests/data/clips/${side}_$clip.y4m.xz" >"$WORK/clips/${side}_$clip.y4m"
    done
done

E="$ROOT/tests/data/expected"
EF="$ROOT/tests/data/expected_float"
for mode in $MODES; do
    pfx=
    CUR_DEV=
    if [ -n "$HIP_DEVICE" ]; then
        pfx="$mode."
        [ "$mode" = gpu ] && CUR_DEV=$HIP_DEVICE
    fi
    for clip in $CLIPS; do
        check_parity "$pfx$clip" "$clip" "$E/$clip.json" "feature=name=psnr:n_threads=2"
    done
    check_parity "${pfx}natural_576x324_420p8.neg" natural_576x324_420p8 \
        "$E/natural_576x324_420p8.neg.json" "model=version=vmaf_v0.6.1neg"
    # Netflix's recommended model by its built-in name.
    check_parity "${pfx}natural_576x324_420p8.v1_3d0h" natural_576x324_420p8 \
        "$EF/natural_576x324_420p8.vmaf_v1.0.16_3d0h.json" "model=version=vmaf_v1.0.16_3d0h"
    # Upstream's float model and float extractors.
    check_parity "${pfx}natural_576x324_420p8.float_model" natural_576x324_420p8 \
        "$EF/natural_576x324_420p8.vmaf_float_v0.6.1.json" "model=version=vmaf_float_v0.6.1" float
    check_parity "${pfx}natural_576x324_420p8.float_features" natural_576x324_420p8 \
        "$EF/natural_576x324_420p8.float_features.json" \
        "feature=name=float_psnr|name=float_ansnr|name=float_moment|name=float_vif|name=float_adm|name=float_motion" \
        float
done
CUR_DEV=

if [ -n "$HIP_DEVICE" ]; then
    check_clean_failure no-device-hip_device=99 hip_device=99 "could not open GPU device 99"
else
    check_clean_failure no-gpu-hip_device=0 hip_device=0 "could not open GPU device 0"
fi

# FFmpeg linked with libvmaf.a: the same checks with no libvmaf.so anywhere
# (in the bundle too), on the CPU, and on the GPU in GPU mode.
STATIC_BIN=
if [ -n "$PREBUILT" ]; then
    [ -x "$PREBUILT/bin/ffmpeg-static" ] && STATIC_BIN="$PREBUILT/bin/ffmpeg-static"
elif [ "${VMAF_FFMPEG_STATIC:-1}" != 0 ]; then
    STATIC_BIN="$PREFIX/bin/ffmpeg-static"
fi
if [ -n "$STATIC_BIN" ]; then
    FF=$STATIC_BIN
    check_static_binary "$FF"
    for mode in $MODES; do
        CUR_DEV=
        [ "$mode" = gpu ] && CUR_DEV=$HIP_DEVICE
        for clip in natural_576x324_420p8 natural_640x360_420p10; do
            check_parity "static.$mode.$clip" "$clip" "$E/$clip.json" "feature=name=psnr:n_threads=2"
        done
        check_parity "static.$mode.natural_576x324_420p8.v1_3d0h" natural_576x324_420p8 \
            "$EF/natural_576x324_420p8.vmaf_v1.0.16_3d0h.json" "model=version=vmaf_v1.0.16_3d0h"
    done
    CUR_DEV=
    if [ -z "$HIP_DEVICE" ]; then
        check_clean_failure static.no-gpu-hip_device=0 hip_device=0 "could not open GPU device 0"
    fi
    FF=
fi

# FFmpeg without --enable-libvmaf-hip: CPU scores unchanged, hip_device refused.
if [ -z "$PREBUILT" ] && [ "${VMAF_FFMPEG_NOHIP:-1}" != 0 ]; then
    FF="$PREFIX/bin/ffmpeg-nohip"
    check_binary "$FF"
    check_parity nohip.testsrc_480x270_444p8 testsrc_480x270_444p8 \
        "$E/testsrc_480x270_444p8.json" "feature=name=psnr:n_threads=2"
    check_clean_failure nohip.hip_device=0 hip_device=0 "FFmpeg was built without libvmaf_hip"
    FF=
fi

if [ -z "$PREBUILT" ]; then
    cuda_variant
    log "relocatable ffmpeg + libvmaf_hip: $BUNDLE"
    [ -d "$CUDA_BUNDLE" ] && [ "$CUDA" != 0 ] && log "CUDA bundle: $CUDA_BUNDLE ($(du -sh "$CUDA_BUNDLE" | cut -f1))"
fi
summary
exit $FAILED
