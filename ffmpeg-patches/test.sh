#!/usr/bin/env bash
# Builds FFmpeg 7.1.5 (Debian source package) with ffmpeg-patches/ against
# vmaf-hip's library and checks the libvmaf filter on the parity clips.
#
#   ffmpeg-patches/test.sh                  build everything, run the CPU checks
#   ffmpeg-patches/test.sh --prebuilt DIR   only run the checks with DIR/bin/ffmpeg
#                                           (DIR/lib holds libvmaf.so.3)
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

while [ $# -gt 0 ]; do
    case $1 in
    --prebuilt) PREBUILT=$(cd "$2" && pwd); shift 2 ;;
    -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
    esac
done
case $HIP_DEVICE in ''|[0-9]|[0-9][0-9]) ;; *) echo "bad VMAF_FFMPEG_HIP_DEVICE" >&2; exit 2 ;; esac

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
        meson configure "$b" -Dprefix="$PREFIX" -Dlibdir=lib -Dlibvmaf_compat=true -Dcargo_target_dir=
    else
        rm -rf "$b"
        meson setup "$b" "$ROOT" --prefix="$PREFIX" --libdir=lib --buildtype=release -Dlibvmaf_compat=true
    fi
    meson compile -C "$b" libvmaf_hip
    meson install -C "$b" --no-rebuild
    [ -e "$PREFIX/lib/pkgconfig/libvmaf.pc" ] && [ -e "$PREFIX/include/libvmaf/libvmaf_hip.h" ] &&
        [ -e "$PREFIX/lib/libvmaf.so.3" ]
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

fetch_source() {
    local dsc="$CACHE/src/ffmpeg_${DEB_VERSION#*:}.dsc"
    if [ -f "$dsc" ]; then
        log "FFmpeg source: cached $dsc"
        return 0
    fi
    step apt-update apt_update_source_index
    pass "apt: deb-src index for $DEB_SUITE verified with keys: $(cat "$WORK/apt/how")"
    rm -rf "$CACHE/src.tmp" && mkdir -p "$CACHE/src.tmp"
    # shellcheck disable=SC2046
    step apt-source sh -c "cd '$CACHE/src.tmp' && apt-get $(apt_opts "$(cat "$WORK/apt/extra")") source --download-only 'ffmpeg=$DEB_VERSION'"
    rm -rf "$CACHE/src" && mv "$CACHE/src.tmp" "$CACHE/src"
    [ -f "$dsc" ] || die "apt-get source did not produce $dsc"
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

# $1: tree, $2: variant: hip (--enable-libvmaf-hip) or nohip (plain libvmaf)
configure_ffmpeg() {
    local hip=0
    cd "$1"
    if [ "$2" = hip ]; then
        hip=1
        set -- --enable-libvmaf-hip
    else
        set --
    fi
    PKG_CONFIG_PATH="$PREFIX/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}" \
        ./configure "${FF_CONFIGURE[@]}" "$@"
    grep "^#define CONFIG_LIBVMAF_HIP $hip\$" config.h
    grep -q '^#define CONFIG_LIBVMAF_FILTER 1' config_components.h
    grep -F 'rpath,\$$ORIGIN/../lib' ffbuild/config.mak
}

# $1: variant (hip or nohip); installs $PREFIX/bin/ffmpeg or ffmpeg-nohip
build_ffmpeg() {
    local variant=$1 key tree bin=ffmpeg
    [ "$variant" = nohip ] && bin=ffmpeg-nohip
    key=$(build_key "$variant")
    tree="$CACHE/ffmpeg-$variant-$key"
    if [ -x "$tree/ffmpeg" ] && [ -f "$tree/.vmaf-hip-built" ]; then
        log "FFmpeg ($variant): cached build $tree"
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

# $1 label, $2 clip, $3 expected json, $4 extra filter options
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
    if cmp=$(python3 "$HERE/vmaf_json_cmp.py" "$expected" "$json" --skip "$SKIP_METRICS" 2>&1); then
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
    build_ffmpeg hip
    pass "FFmpeg $DEB_VERSION: patched (patch -p1 and git am), built with --enable-libvmaf-hip"
    if [ "${VMAF_FFMPEG_NOHIP:-1}" != 0 ]; then
        build_ffmpeg nohip
        pass "FFmpeg $DEB_VERSION: patched, built without --enable-libvmaf-hip"
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
done
CUR_DEV=

if [ -n "$HIP_DEVICE" ]; then
    check_clean_failure no-device-hip_device=99 hip_device=99 "could not open GPU device 99"
else
    check_clean_failure no-gpu-hip_device=0 hip_device=0 "could not open GPU device 0"
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

[ -z "$PREBUILT" ] && log "relocatable ffmpeg + libvmaf_hip: $BUNDLE"
summary
exit $FAILED
