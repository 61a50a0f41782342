#!/usr/bin/env bash
# Checks FFmpeg's unmodified libvmaf_cuda filter with vmaf-hip's library, and
# the patched libvmaf filter on CUDA frames, from the CUDA bundle made by
# ffmpeg-patches/test.sh (bin/ffmpeg: unmodified, bin/ffmpeg-hip: patched,
# lib/, inputs/, clips/, expected/, this script and vmaf_json_cmp.py).
#
#   cuda_check.sh [--no-device] [BUNDLE]     (BUNDLE: default this script's dir)
#
# With an NVIDIA GPU: libvmaf_cuda on NVDEC frames (scale_cuda to yuv420p,
# nearest, so the luma is the decoder's) and on uploaded frames (hwupload_cuda)
# must give the same JSON log, to the last printed digit, as the libvmaf filter
# on the CPU on the same frames (software decode: H.264/HEVC decoding is
# bit-exact); unsupported sw formats (nv12, p010le) must fail cleanly;
# throughput lines on the long 1080p H.264 pair (the clip encoded 75 times in
# a row, 600 frames): NVDEC + scale_cuda alone, NVDEC + scale_cuda +
# libvmaf_cuda, their time ratio, and the CPU libvmaf filter on software
# decoded frames for reference.
# If NVDEC does not work, the encoded inputs are decoded in software and
# uploaded, and the output says so.
# --no-device: a machine without NVIDIA GPU; the CUDA pipelines must fail
# cleanly (non-zero exit status, no signal).
#
# Environment: VMAF_FFMPEG_CUDA_DEVICE CUDA device index (default 0)
#              VMAF_FFMPEG_CPU_THREADS n_threads of the CPU libvmaf line
#                                      (default: nproc)
#              VMAF_FFMPEG_KEEP        1: keep the work directory
# Exit status 0 when every check passed.
set -euo pipefail

NO_DEVICE=0
if [ "${1:-}" = --no-device ]; then
    NO_DEVICE=1
    shift
fi
B=$(cd "${1:-$(dirname "${BASH_SOURCE[0]}")}" && pwd)
FF="$B/bin/ffmpeg"
DEV=${VMAF_FFMPEG_CUDA_DEVICE:-0}
CPU_THREADS=${VMAF_FFMPEG_CPU_THREADS:-$(nproc)}
case $DEV in ''|*[!0-9]*) echo "bad VMAF_FFMPEG_CUDA_DEVICE" >&2; exit 2 ;; esac
case $CPU_THREADS in ''|*[!0-9]*) echo "bad VMAF_FFMPEG_CPU_THREADS" >&2; exit 2 ;; esac

WORK=$(mktemp -d "${TMPDIR:-/tmp}/vmaf-cuda-check.XXXXXX")
cleanup() { [ "${VMAF_FFMPEG_KEEP:-0}" = 1 ] && echo "work directory kept: $WORK" || rm -rf "$WORK"; }
trap cleanup EXIT

T0=$(date +%s)
RESULTS=()
FAILED=0
log()  { printf '[%4ds] %s\n' $(($(date +%s) - T0)) "$*"; }
pass() { RESULTS+=("PASS  $1"); log "PASS  $1"; }
fail() { RESULTS+=("FAIL  $1"); log "FAIL  $1"; FAILED=1; }
note() { RESULTS+=("NOTE  $1"); log "NOTE  $1"; }
summary() {
    echo
    echo "============ FFmpeg libvmaf_cuda filter (vmaf-hip, unmodified FFmpeg) ============"
    [ ${#RESULTS[@]} -gt 0 ] && printf '%s\n' "${RESULTS[@]}"
    echo "----------------------------------------------------------------------------------"
    if [ $FAILED = 0 ]; then echo "ALL PASSED ($(($(date +%s) - T0)) s)"; else echo "FAILED ($(($(date +%s) - T0)) s)"; fi
}

for tool in python3 xz; do
    command -v $tool >/dev/null || { fail "missing tool: $tool"; summary; exit 1; }
done
[ -x "$FF" ] || { fail "no $FF"; summary; exit 1; }

# $1 label, then ffmpeg's arguments. stdout/stderr go to $WORK/<label>.{out,err};
# RC is the exit status, or "signal N" (ffmpeg exits with its error code modulo
# 256, so a shell's 128+N would be ambiguous); SECS the wall time.
ff() {
    local label=$1 t
    shift
    t=$(date +%s%N)
    (ulimit -c 0; cd "$WORK" && python3 -c '
import subprocess, sys
r = subprocess.run(sys.argv[2:])
with open(sys.argv[1], "w") as f:
    f.write(f"signal {-r.returncode}" if r.returncode < 0 else str(r.returncode))
' "$WORK/$label.rc" "$FF" -nostdin -hide_banner -loglevel info "$@" \
        >"$WORK/$label.out" 2>"$WORK/$label.err") || true
    RC=$(cat "$WORK/$label.rc" 2>/dev/null || echo "not run")
    SECS=$(python3 -c "print(f'{($(date +%s%N) - $t) / 1e9:.2f}')")
}

# first error-looking line of a run's log
first_error() {
    grep -m1 -i 'error\|fail\|cannot\|unsupported\|no device\|not found' "$WORK/$1.err" |
        sed 's/^\[[^]]*\] //' || true
}

# $1 label: the run must have failed cleanly, with $2 (grep -F) in its log
expect_clean_failure() {
    local label=$1 want=$2 msg
    msg=$(grep -m1 -F -- "$want" "$WORK/$label.err" | sed 's/^\[[^]]*\] //' || true)
    if [ "$RC" = 0 ]; then
        fail "$label: ffmpeg succeeded"
    elif [ "${RC#signal}" != "$RC" ]; then
        tail -n 10 "$WORK/$label.err"
        fail "$label: ffmpeg crashed ($RC)"
    elif [ -z "$msg" ]; then
        tail -n 10 "$WORK/$label.err"
        fail "$label: exit status $RC but no '$want' in the log"
    else
        pass "$label: exit status $RC, \"$msg\""
    fi
}

# $1 label: the run must have succeeded
ran_ok() {
    [ "$RC" = 0 ] && return 0
    tail -n 15 "$WORK/$1.err"
    fail "$1: ffmpeg exit status $RC: $(first_error "$1")"
    return 1
}

# $1 label: every metric of $1.json (the libvmaf_cuda run) equal in $2 (a JSON
# log of the same frames), to the last printed digit
compare_json() {
    local label=$1 ref=$2 what=$3 cmp
    if cmp=$(python3 "$B/vmaf_json_cmp.py" "$WORK/$label.json" "$ref" 2>&1); then
        pass "$label: = $what: $(echo "$cmp" | tail -n 1) ($(grep -o 'VMAF score: [0-9.]*' "$WORK/$label.err" | head -n 1), $SECS s)"
    else
        echo "$cmp" | head -n 20
        fail "$label: != $what: $(echo "$cmp" | tail -n 1)"
    fi
}

vmaf_cuda() { echo "libvmaf_cuda=log_fmt=json:log_path=$WORK/$1.json"; }
vmaf_cpu() { echo "libvmaf=log_fmt=json:log_path=$WORK/$1.json"; }
# one CUDA device for both decoders and the filters (-hwaccel_device N
# would open a context per input)
HWDEV=(-init_hw_device "cuda=cu:$DEV" -filter_hw_device cu)
NVDEC=(-hwaccel cuda -hwaccel_device cu -hwaccel_output_format cuda)
# FFmpeg's documented form, the device picked by FFmpeg
NVDEC_PLAIN=(-hwaccel cuda -hwaccel_output_format cuda)
TO420='scale_cuda=format=yuv420p:interp_algo=nearest'

# ------------------------------------------------------------------ filters

filters=$("$FF" -hide_banner -filters 2>&1 || true)
for f in libvmaf libvmaf_cuda hwupload_cuda scale_cuda; do
    if echo "$filters" | grep -q " $f "; then
        pass "ffmpeg -filters lists $f"
    else
        fail "ffmpeg -filters: no $f"
    fi
done
"$FF" -hide_banner -version | head -n 1

mkdir -p "$WORK/clips"
for c in "$B"/clips/*.y4m.xz; do
    xz -dc "$c" >"$WORK/clips/$(basename "$c" .xz)"
done
# inputs/list: name codec clip kind (parity, 10bit or throughput)
mapfile -t INPUTS < <(grep -v '^#' "$B/inputs/list")
first_parity=$(printf '%s\n' "${INPUTS[@]}" | awk '$4 == "parity" { print $1; exit }')
in_() { echo "$B/inputs/$1_$2.mp4"; }

# ------------------------------------------------------------------ no device

if [ $NO_DEVICE = 1 ]; then
    ff no-device.nvdec "${NVDEC_PLAIN[@]}" -i "$(in_ "$first_parity" dist)" "${NVDEC_PLAIN[@]}" -i "$(in_ "$first_parity" ref)" \
        -lavfi "[0:v]$TO420[d];[1:v]$TO420[r];[d][r]$(vmaf_cuda no-device.nvdec)" -f null -
    if [ "$RC" = 0 ]; then
        fail "no-device.nvdec: succeeded: there is a device here, run without --no-device"
    elif [ "${RC#signal}" != "$RC" ]; then
        fail "no-device.nvdec: ffmpeg crashed ($RC)"
    else
        pass "no-device.nvdec: NVDEC + libvmaf_cuda fails cleanly: exit status $RC, \"$(first_error no-device.nvdec)\""
    fi
    clip=$(awk -v n="$first_parity" '$1 == n { print $3 }' "$B/inputs/list")
    ff no-device.upload "${HWDEV[@]}" -i "$WORK/clips/dist_$clip.y4m" -i "$WORK/clips/ref_$clip.y4m" \
        -lavfi "[0:v]hwupload_cuda[d];[1:v]hwupload_cuda[r];[d][r]$(vmaf_cuda no-device.upload)" -f null -
    if [ "$RC" = 0 ]; then
        fail "no-device.upload: succeeded: there is a device here, run without --no-device"
    elif [ "${RC#signal}" != "$RC" ]; then
        fail "no-device.upload: ffmpeg crashed ($RC)"
    else
        pass "no-device.upload: hwupload_cuda + libvmaf_cuda fails cleanly: exit status $RC, \"$(first_error no-device.upload)\""
    fi
    note "skipped: no NVIDIA device (--no-device): no parity or throughput checks"
    summary
    exit $FAILED
fi

# ------------------------------------------------------------------ device?

clip=$(awk -v n="$first_parity" '$1 == n { print $3 }' "$B/inputs/list")
ff device-probe "${HWDEV[@]}" -i "$WORK/clips/ref_$clip.y4m" -frames:v 1 -vf hwupload_cuda -f null -
if [ "$RC" != 0 ]; then
    tail -n 10 "$WORK/device-probe.err"
    fail "no usable NVIDIA device $DEV ($(first_error device-probe)); on a machine without one, run with --no-device"
    summary
    exit 1
fi
pass "CUDA device $DEV: hwupload_cuda works"

# ------------------------------------------------------------------ NVDEC?

ff nvdec-probe "${HWDEV[@]}" "${NVDEC[@]}" -i "$(in_ "$first_parity" ref)" -f null -
USE_NVDEC=0
if ! echo "$filters" | grep -q ' scale_cuda '; then
    note "no scale_cuda in this ffmpeg: NVDEC's nv12 frames cannot reach libvmaf_cuda; encoded inputs are decoded in software and uploaded with hwupload_cuda instead"
elif [ "$RC" = 0 ]; then
    USE_NVDEC=1
    pass "NVDEC decodes $(basename "$(in_ "$first_parity" ref)") into CUDA frames"
else
    tail -n 10 "$WORK/nvdec-probe.err"
    note "NVDEC does not work here ($(first_error nvdec-probe)): encoded inputs are decoded in software and uploaded with hwupload_cuda instead"
fi

# ------------------------------------------------------------------ parity

# Uploaded y4m frames, against the CPU filter on the same y4m and against
# upstream libvmaf's log of the clip (tests/data/expected).
for clip in $(printf '%s\n' "${INPUTS[@]}" | awk '$4 == "parity" { print $3 }' | sort -u); do
    d="$WORK/clips/dist_$clip.y4m" r="$WORK/clips/ref_$clip.y4m"
    [ -f "$d" ] || continue
    ff "y4m.$clip.cpu" -i "$d" -i "$r" -lavfi "$(vmaf_cpu "y4m.$clip.cpu")" -f null -
    ran_ok "y4m.$clip.cpu" || continue
    ff "y4m.$clip.cuda" "${HWDEV[@]}" -i "$d" -i "$r" \
        -lavfi "[0:v]hwupload_cuda[d];[1:v]hwupload_cuda[r];[d][r]$(vmaf_cuda "y4m.$clip.cuda")" -f null -
    ran_ok "y4m.$clip.cuda" || continue
    compare_json "y4m.$clip.cuda" "$WORK/y4m.$clip.cpu.json" "libvmaf (CPU) on the same y4m"
    [ -f "$B/expected/$clip.json" ] &&
        compare_json "y4m.$clip.cuda" "$B/expected/$clip.json" "upstream libvmaf's expected/$clip.json"
done

# Encoded pairs: NVDEC (or software decode + upload) against the CPU filter on
# software-decoded frames.
for line in "${INPUTS[@]}"; do
    read -r name codec clip kind <<<"$line"
    [ "$kind" = parity ] || continue
    d=$(in_ "$name" dist) r=$(in_ "$name" ref)
    ff "$name.cpu" -i "$d" -i "$r" -lavfi "$(vmaf_cpu "$name.cpu")" -f null -
    ran_ok "$name.cpu" || continue
    if [ $USE_NVDEC = 1 ]; then
        label="$name.nvdec"
        ff "$label" "${HWDEV[@]}" "${NVDEC[@]}" -i "$d" "${NVDEC[@]}" -i "$r" \
            -lavfi "[0:v]$TO420[d];[1:v]$TO420[r];[d][r]$(vmaf_cuda "$label")" -f null -
    else
        label="$name.swdec-upload"
        ff "$label" "${HWDEV[@]}" -i "$d" -i "$r" \
            -lavfi "[0:v]hwupload_cuda[d];[1:v]hwupload_cuda[r];[d][r]$(vmaf_cuda "$label")" -f null -
    fi
    ran_ok "$label" || continue
    compare_json "$label" "$WORK/$name.cpu.json" "libvmaf (CPU) on software-decoded $codec"
done

# 10-bit HEVC: NVDEC gives p010le, scale_cuda turns it into yuv444p16 (the
# other format libvmaf_cuda takes: bpc 16, the 10 bits at the top of each
# sample). The CPU filter reads the same frames, downloaded (hwdownload).
TO444='scale_cuda=format=yuv444p16:interp_algo=nearest'
for line in "${INPUTS[@]}"; do
    read -r name codec clip kind <<<"$line"
    [ "$kind" = 10bit ] || continue
    if [ $USE_NVDEC = 0 ]; then
        note "$name: skipped (10-bit needs NVDEC and scale_cuda)"
        continue
    fi
    d=$(in_ "$name" dist) r=$(in_ "$name" ref)
    ff "$name.cpu" "${HWDEV[@]}" "${NVDEC[@]}" -i "$d" "${NVDEC[@]}" -i "$r" \
        -lavfi "[0:v]$TO444,hwdownload,format=yuv444p16[d];[1:v]$TO444,hwdownload,format=yuv444p16[r];[d][r]$(vmaf_cpu "$name.cpu")" -f null -
    ran_ok "$name.cpu" || continue
    label="$name.nvdec"
    ff "$label" "${HWDEV[@]}" "${NVDEC[@]}" -i "$d" "${NVDEC[@]}" -i "$r" \
        -lavfi "[0:v]$TO444[d];[1:v]$TO444[r];[d][r]$(vmaf_cuda "$label")" -f null -
    ran_ok "$label" || continue
    compare_json "$label" "$WORK/$name.cpu.json" "libvmaf (CPU) on the same NVDEC frames (yuv444p16, downloaded)"
done

# ------------------------------------------------------------------ unsupported formats

# libvmaf_cuda takes yuv420p and yuv444p16 CUDA frames only; NVDEC gives nv12
# (8-bit) and p010le (10-bit), hence scale_cuda above.
declare -A SEEN_FMT=()
if [ $USE_NVDEC = 1 ]; then
    for line in "${INPUTS[@]}"; do
        read -r name codec clip kind <<<"$line"
        case $kind in parity) want=nv12 ;; 10bit) want=p010le ;; *) continue ;; esac
        [ -n "${SEEN_FMT[$want]:-}" ] && continue
        SEEN_FMT[$want]=1
        ff "unsupported.$name" "${NVDEC_PLAIN[@]}" -i "$(in_ "$name" dist)" "${NVDEC_PLAIN[@]}" -i "$(in_ "$name" ref)" \
            -lavfi "[0:v][1:v]$(vmaf_cuda "unsupported.$name")" -f null -
        expect_clean_failure "unsupported.$name" "Unsupported input format: $want"
    done
else
    name=$first_parity
    ff "unsupported.$name" "${HWDEV[@]}" -i "$(in_ "$name" dist)" -i "$(in_ "$name" ref)" \
        -lavfi "[0:v]format=nv12,hwupload_cuda[d];[1:v]format=nv12,hwupload_cuda[r];[d][r]$(vmaf_cuda "unsupported.$name")" -f null -
    expect_clean_failure "unsupported.$name" "Unsupported input format: nv12"
fi

# ------------------------------------------------------------------ the patched libvmaf filter on CUDA frames

# bin/ffmpeg-hip: FFmpeg with ffmpeg-patches/ and --enable-libvmaf-hip, same
# CUDA configuration. Its libvmaf filter takes NVDEC's nv12/p010le frames with
# hip_device and scores them in GPU memory: no scale_cuda, no download. Each
# JSON log must equal the unmodified CPU filter's on software-decoded frames
# (yuv420p / yuv420p10le), 10-bit included.
FH="$B/bin/ffmpeg-hip"
HIP_OK=0
vmaf_hip() { echo "libvmaf=hip_device=$DEV:log_fmt=json:log_path=$WORK/$1.json${2:+:$2}"; }
# ff with bin/ffmpeg-hip
ffh() { local keep=$FF; FF=$FH; ff "$@"; FF=$keep; }
if [ ! -x "$FH" ]; then
    note "no bin/ffmpeg-hip in this bundle: the patched filter's CUDA checks are skipped"
elif [ $USE_NVDEC = 0 ]; then
    note "the patched filter's CUDA frame checks need NVDEC: skipped"
else
    HIP_OK=1
    for line in "${INPUTS[@]}"; do
        read -r name codec clip kind <<<"$line"
        case $kind in parity) fmt=nv12 ;; 10bit) fmt=p010le ;; *) continue ;; esac
        d=$(in_ "$name" dist) r=$(in_ "$name" ref)
        # the model alone (luma), PSNR (chroma on the GPU), VMAF v1.0.16 (speed_chroma)
        for extra in "" "feature=name=psnr" "model=version=vmaf_v1.0.16_3d0h"; do
            case $extra in
            "") tag= ;;
            feature=*) tag=.psnr ;;
            *) tag=.v1 ;;
            esac
            ff "$name$tag.swcpu" -i "$d" -i "$r" -lavfi "$(vmaf_cpu "$name$tag.swcpu")${extra:+:$extra}" -f null -
            ran_ok "$name$tag.swcpu" || continue
            label="$name$tag.hip-nvdec"
            ffh "$label" "${HWDEV[@]}" "${NVDEC[@]}" -i "$d" "${NVDEC[@]}" -i "$r" \
                -lavfi "[0:v][1:v]$(vmaf_hip "$label" "$extra")" -f null -
            ran_ok "$label" || continue
            if ! grep -q "reading $fmt CUDA frames in place" "$WORK/$label.err"; then
                fail "$label: no 'reading $fmt CUDA frames in place' in the log"
                continue
            fi
            compare_json "$label" "$WORK/$name$tag.swcpu.json" \
                "libvmaf (CPU) on software-decoded $codec ($fmt frames${extra:+, $extra})"
        done
    done
    # planar CUDA frames (read in place): yuv420p from scale_cuda (nearest keeps NVDEC's
    # samples) against the CPU on software-decoded frames; 10-bit as yuv444p16 against the CPU
    # filter on the same frames downloaded (as libvmaf_cuda above)
    for line in "${INPUTS[@]}"; do
        read -r name codec clip kind <<<"$line"
        d=$(in_ "$name" dist) r=$(in_ "$name" ref)
        case $kind in
        parity)
            [ "$name" = "$first_parity" ] || continue
            label="$name.hip-yuv420p"
            ffh "$label" "${HWDEV[@]}" "${NVDEC[@]}" -i "$d" "${NVDEC[@]}" -i "$r" \
                -lavfi "[0:v]$TO420[d];[1:v]$TO420[r];[d][r]$(vmaf_hip "$label" feature=name=psnr)" -f null -
            ran_ok "$label" || continue
            compare_json "$label" "$WORK/$name.psnr.swcpu.json" \
                "libvmaf (CPU) on software-decoded $codec (yuv420p CUDA frames from scale_cuda)"
            ;;
        10bit)
            label="$name.hip-yuv444p16"
            ffh "$label" "${HWDEV[@]}" "${NVDEC[@]}" -i "$d" "${NVDEC[@]}" -i "$r" \
                -lavfi "[0:v]$TO444[d];[1:v]$TO444[r];[d][r]$(vmaf_hip "$label")" -f null -
            ran_ok "$label" || continue
            compare_json "$label" "$WORK/$name.cpu.json" \
                "libvmaf (CPU) on the same NVDEC frames (yuv444p16 CUDA frames, downloaded)"
            ;;
        esac
    done
    # cropped CUDA frames: the crop filter only sets a hardware frame's crop_* fields, which
    # the patched filter applies (luma and, for PSNR, the interleaved chroma at the offset),
    # against the CPU filter on the same crop of software-decoded frames
    name=$first_parity
    d=$(in_ "$name" dist) r=$(in_ "$name" ref)
    CROP="crop=iw-40:ih-22:16:6"
    ff "$name.crop.swcpu" -i "$d" -i "$r" \
        -lavfi "[0:v]$CROP[d];[1:v]$CROP[r];[d][r]$(vmaf_cpu "$name.crop.swcpu"):feature=name=psnr" -f null -
    if ran_ok "$name.crop.swcpu"; then
        label="$name.hip-crop"
        ffh "$label" "${HWDEV[@]}" "${NVDEC[@]}" -i "$d" "${NVDEC[@]}" -i "$r" \
            -lavfi "[0:v]$CROP[d];[1:v]$CROP[r];[d][r]$(vmaf_hip "$label" feature=name=psnr)" -f null -
        ran_ok "$label" &&
            compare_json "$label" "$WORK/$name.crop.swcpu.json" \
                "libvmaf (CPU) on the same crop of software-decoded frames (cropped nv12 CUDA frames)"
    fi
    # clean failures: inputs of different formats, CUDA frames without hip_device, CUDA frames
    # of device 0 given to hip_device=1 (the library's -EXDEV, whether or not a device 1 exists)
    name=$first_parity
    d=$(in_ "$name" dist) r=$(in_ "$name" ref)
    ffh hip.mixed-formats "${HWDEV[@]}" "${NVDEC[@]}" -i "$d" "${NVDEC[@]}" -i "$r" \
        -lavfi "[0:v]$TO420[d];[d][1:v]$(vmaf_hip hip.mixed-formats)" -f null -
    expect_clean_failure hip.mixed-formats "CUDA frames differ in format"
    ffh hip.no-hip_device "${HWDEV[@]}" "${NVDEC[@]}" -i "$d" "${NVDEC[@]}" -i "$r" \
        -lavfi "[0:v][1:v]libvmaf" -f null -
    expect_clean_failure hip.no-hip_device "CUDA frames need hip_device"
    ffh hip.other-gpu "${HWDEV[@]}" "${NVDEC[@]}" -i "$d" "${NVDEC[@]}" -i "$r" \
        -lavfi "[0:v][1:v]libvmaf=hip_device=$((DEV + 1))" -f null -
    expect_clean_failure hip.other-gpu "the CUDA frames are on another GPU than hip_device=$((DEV + 1))"
fi

# ------------------------------------------------------------------ throughput

# frames from -progress's last frame= line
frames_of() { sed -n 's/^frame=//p' "$WORK/$1.progress" 2>/dev/null | tail -n 1; }
# pooled score the filter printed
score_of() { grep -o 'VMAF score: [0-9.]*' "$WORK/$1.err" | tail -n 1 | sed 's/.*: //' || true; }
fps_line() {
    local label=$1 what=$2 n score
    n=$(frames_of "$label")
    score=$(score_of "$label")
    note "$(printf '%-46s %5s frames %7s s %8s fps%s' "$what" "${n:-?}" "$SECS" \
        "$(python3 -c "print(f'{${n:-0} / max($SECS, 1e-9):.1f}')")" "${score:+  VMAF $score}")"
}
for line in "${INPUTS[@]}"; do
    read -r name codec clip kind <<<"$line"
    [ "$kind" = throughput ] || continue
    d=$(in_ "$name" dist) r=$(in_ "$name" ref)
    what="$codec $clip x$(echo "$name" | sed -n 's/.*_x\([0-9]*\)$/\1/p')"
    if [ $USE_NVDEC = 1 ]; then
        # (1) both inputs through NVDEC and scale_cuda, nothing else
        ff "$name.decode" -progress "$WORK/$name.decode.progress" "${HWDEV[@]}" "${NVDEC[@]}" -i "$d" "${NVDEC[@]}" -i "$r" \
            -lavfi "[0:v]$TO420[d];[1:v]$TO420[r]" -map '[d]' -f null - -map '[r]' -f null -
        dec_secs=
        ran_ok "$name.decode" && fps_line "$name.decode" "$what (1) NVDEC+scale_cuda x2, no VMAF" &&
            dec_secs=$SECS
        # (2) the same graph feeding libvmaf_cuda
        ff "$name.vmaf" -progress "$WORK/$name.vmaf.progress" "${HWDEV[@]}" "${NVDEC[@]}" -i "$d" "${NVDEC[@]}" -i "$r" \
            -lavfi "[0:v]$TO420[d];[1:v]$TO420[r];[d][r]$(vmaf_cuda "$name.vmaf")" -f null -
        if ran_ok "$name.vmaf"; then
            fps_line "$name.vmaf" "$what (2) NVDEC+scale_cuda+libvmaf_cuda"
            [ -n "$dec_secs" ] && note "$(printf '%-46s %s' "$what (2)/(1) wall time" \
                "$(python3 -c "print(f'{$SECS / max($dec_secs, 1e-9):.2f}')")")"
        fi
    else
        ff "$name.vmaf" -progress "$WORK/$name.vmaf.progress" "${HWDEV[@]}" -i "$d" -i "$r" \
            -lavfi "[0:v]hwupload_cuda[d];[1:v]hwupload_cuda[r];[d][r]$(vmaf_cuda "$name.vmaf")" -f null -
        ran_ok "$name.vmaf" && fps_line "$name.vmaf" "$what sw decode+upload+libvmaf_cuda"
    fi
    if [ $HIP_OK = 1 ]; then
        declare -A RATE=() WALL=()
        # (4) both inputs through NVDEC alone: the decode-only rate; (5) NVDEC frames straight
        # into the patched libvmaf filter, v0.6.1 and v1.0.16. Each: the whole process, and the
        # steady rate (frame 100 to the last, timed as -progress reports them), which leaves
        # out start-up and teardown.
        for run in "nvdec-only|(4) NVDEC x2, no VMAF|" \
                   "hip|(5) NVDEC+libvmaf hip_device|libvmaf=hip_device=$DEV" \
                   "hip-v1|(5) same, vmaf_v1.0.16_3d0h|libvmaf=hip_device=$DEV:model=version=vmaf_v1.0.16_3d0h"; do
            IFS='|' read -r tag what_run graph <<<"$run"
            label="$name.$tag"
            if [ -z "$graph" ]; then
                set -- -map 0:v -f null - -map 1:v -f null -
            else
                set -- -lavfi "[0:v][1:v]$graph" -f null -
            fi
            ffh "$label" -progress "$WORK/$label.progress" "${HWDEV[@]}" "${NVDEC[@]}" -i "$d" "${NVDEC[@]}" -i "$r" "$@"
            ran_ok "$label" || continue
            fps_line "$label" "$what $what_run"
            WALL[$tag]=$SECS
            # the steady rate: the same command again, its progress lines timed as they come
            rate=$(cd "$WORK" && python3 - "$FH" -nostdin -hide_banner -loglevel error -progress pipe:2 \
                -stats_period 0.02 "${HWDEV[@]}" "${NVDEC[@]}" -i "$d" "${NVDEC[@]}" -i "$r" "$@" <<'PY'
import subprocess, sys, time
t0 = time.time()
p = subprocess.Popen(sys.argv[1:], stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
pts = []
for line in p.stderr:
    if line.startswith("frame="):
        try:
            pts.append((time.time() - t0, int(line.split("=")[1])))
        except ValueError:
            pass
p.wait()
last = max(n for _, n in pts) if pts else 0
a = next((x for x in pts if x[1] >= 100), None)
b = next((x for x in pts if x[1] == last), None)
print(f"{(b[1] - a[1]) / (b[0] - a[0]):.1f}" if p.returncode == 0 and a and b and b[0] > a[0] else "nan")
PY
)
            RATE[$tag]=$rate
            note "$(printf '%-46s %8s fps' "$what $what_run, steady" "$rate")"
        done
        for tag in hip hip-v1; do
            [ -n "${RATE[nvdec-only]:-}" ] && [ -n "${WALL[nvdec-only]:-}" ] && [ -n "${WALL[$tag]:-}" ] &&
                note "$(printf '%-46s steady rate %s, whole process %s' "$what $tag/(4)" \
                    "$(python3 -c "import sys; print(f'{float(sys.argv[1]) / float(sys.argv[2]):.3f}')" "${RATE[$tag]:-nan}" "${RATE[nvdec-only]}")" \
                    "$(python3 -c "import sys; print(f'{float(sys.argv[1]) / max(float(sys.argv[2]), 1e-9):.3f}')" "${WALL[nvdec-only]}" "${WALL[$tag]}")")"
        done
    fi
    # (3) reference: software decode, the libvmaf filter on the CPU
    ff "$name.cpu" -progress "$WORK/$name.cpu.progress" -i "$d" -i "$r" \
        -lavfi "[0:v][1:v]libvmaf=n_threads=$CPU_THREADS" -f null -
    ran_ok "$name.cpu" && fps_line "$name.cpu" "$what (3) sw decode+libvmaf CPU ($CPU_THREADS thr)"
done

summary
exit $FAILED
