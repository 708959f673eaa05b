#!/bin/sh
# The AVX-512 kernels on a CPU without AVX-512: test_kernels and test_ops,
# linked static with musl, run on Bochs's Ice Lake model (AVX-512 F/BW/VL/DQ
# and VNNI; Bochs 2.7 has no AVX512_BF16, so the bf16 dot-product kernels SKIP
# there) under tests/emu/kernel.c, a minimal kernel that serves their Linux
# system calls. test_kernels' AVX-512 lines are reported here as bochs:NAME,
# test_ops' lines (the op layer on the best table, AVX-512 there) as
# bochs:test_ops:NAME, every failure too, and avx512_kernels_under_bochs
# checks that both runs ended cleanly with the AVX-512 table present and none
# failed. QTTS_EMU_KERNEL_TESTS overrides the test_kernels groups it runs
# (QTTS_KERNEL_TESTS there; the default keeps it to a few minutes). SKIP
# without bochs and musl-gcc (scripts/install-cross-test-deps.sh installs
# them).
cd "$(dirname "$0")/../.." || exit 1
name=avx512_kernels_under_bochs
case "$(uname -m)" in
x86_64 | amd64) ;;
*)
    echo "SKIP $name: not an x86-64 machine"
    exit 0
    ;;
esac
for tool in bochs musl-gcc; do
    if ! command -v $tool >/dev/null 2>&1; then
        echo "SKIP $name: $tool not installed (sh scripts/install-cross-test-deps.sh)"
        exit 0
    fi
done
BXSHARE=${BXSHARE:-/usr/share/bochs}
if [ ! -f "$BXSHARE/BIOS-bochs-latest" ] || [ ! -f /usr/share/vgabios/vgabios.bin ]; then
    echo "SKIP $name: the Bochs BIOS or VGA BIOS is missing (apt-get install bochsbios vgabios)"
    exit 0
fi
all=matmul_float,matmul_quant,dot_axpy,attn_head,attn_head_fused,conv1d_kernels,conv1d_streaming
all=$all,conv_transpose_kernels,conv_transpose_streaming,snake,swiglu,elu,conv_int,conv_i16_qmax,bf16_round,conv_bf16
groups=${QTTS_EMU_KERNEL_TESTS:-$all}
d=$(pwd)/${BUILD:-build}/emu
rm -rf "$d"
mkdir -p "$d/o" "$d/main"
fail() {
    echo "FAIL $name: $*"
    exit 0
}

# test_kernels and test_ops, static with musl, each file with its ISA's flags
# (the Makefile's)
ISA_avx2=$(sed -n 's/^ISA_avx2 *:= *//p' Makefile)
ISA_avx512=$(sed -n 's/^ISA_avx512 *:= *//p' Makefile)
if [ -z "$ISA_avx2" ] || [ -z "$ISA_avx512" ]; then fail "no ISA_avx2 or ISA_avx512 line in the Makefile"; fi
pids=""
for f in tests/unit/test_kernels.c tests/unit/test_ops.c tests/common/test.c src/util/dtype.c src/util/error.c \
    src/util/huge_arena.c src/backend/cpu/*.c; do
    case $f in
    *_neon.c) continue ;;
    *_avx2.c) isa=$ISA_avx2 ;;
    *_avx512.c) isa=$ISA_avx512 ;;
    *) isa="" ;;
    esac
    o=$d/o
    case $f in tests/unit/*) o=$d/main ;; esac
    # shellcheck disable=SC2086
    musl-gcc -std=c11 -D_GNU_SOURCE -O2 -Iinclude -Isrc -Itests/common $isa -c "$f" -o "$o/$(basename "$f" .c).o" \
        2>>"$d/build.log" &
    pids="$pids $!"
done
for p in $pids; do wait "$p" || fail "musl-gcc could not compile the tests (see $d/build.log)"; done
for t in test_kernels test_ops; do
    musl-gcc -static -no-pie "$d/main/$t.o" "$d"/o/*.o -lm -lpthread -o "$d/$t" 2>>"$d/build.log" ||
        fail "musl-gcc could not link $t (see $d/build.log)"
done

# the kernel, loaded at 1 MiB, and the boot sector that jumps to it
KF="-std=gnu11 -ffreestanding -fno-pic -fno-pie -mno-red-zone -mgeneral-regs-only -fno-stack-protector -fno-builtin -O2"
{
    # shellcheck disable=SC2086
    cc $KF -Wall -Wextra -c tests/emu/kernel.c -o "$d/kernel.o" &&
        cc -c tests/emu/entry.S -o "$d/entry.o" &&
        ld -nostdlib -no-pie -z noexecstack --no-warn-rwx-segments -T tests/emu/kernel.ld "$d/entry.o" "$d/kernel.o" \
            -o "$d/kernel.elf" &&
        objcopy -O binary "$d/kernel.elf" "$d/kernel.bin" &&
        cc -m32 -c tests/emu/boot.S -o "$d/boot.o" &&
        ld -m elf_i386 -Ttext 0x7c00 --oformat binary "$d/boot.o" -o "$d/boot.bin"
} >>"$d/build.log" 2>&1 || fail "the emulator's kernel did not build (see $d/build.log)"
# Bochs 2.7 places only the first 128 KiB of a RAM image where it belongs
[ "$(wc -c <"$d/kernel.bin")" -lt 131072 ] || fail "the emulator's kernel is 128 KiB or more"

# the boot floppy; per program the disk holding it (whole cylinders of 16 x
# 63 sectors) and the environment
dd if=/dev/zero of="$d/floppy.img" bs=1024 count=1440 2>/dev/null
dd if="$d/boot.bin" of="$d/floppy.img" conv=notrunc 2>/dev/null
echo c >"$d/cont.rc" # Debian's Bochs has its debugger on: continue at once

# emu PROGRAM ENVLINE: runs build/emu/PROGRAM on Bochs into build/emu/PROGRAM.out;
# fails the test unless it exits with status 0 and reports no failure
emu() {
    cp "$d/$1" "$d/disk.img"
    cyl=$((($(wc -c <"$d/disk.img") + 516095) / 516096))
    truncate -s $((cyl * 516096)) "$d/disk.img"
    printf '%s\n\0' "$2" >"$d/env.txt"
    cat >"$d/bochsrc" <<BXRC
cpu: model=corei7_icelake_u, count=1, ips=200000000, reset_on_triple_fault=0
memory: guest=2048, host=2048
romimage: file=$BXSHARE/BIOS-bochs-latest
vgaromimage: file=/usr/share/vgabios/vgabios.bin
floppya: 1_44=$d/floppy.img, status=inserted
boot: floppy
ata0: enabled=1, ioaddr1=0x1f0, ioaddr2=0x3f0, irq=14
ata0-master: type=disk, path=$d/disk.img, mode=flat, cylinders=$cyl, heads=16, spt=63
optramimage1: file=$d/kernel.bin, address=0x100000
optramimage2: file=$d/env.txt, address=0x0f000000
display_library: rfb, options="timeout=0"
port_e9_hack: enabled=1
log: $d/bochs.log
panic: action=fatal
error: action=report
info: action=ignore
debug: action=ignore
clock: sync=none, time0=1
sound: driver=dummy
speaker: enabled=0
BXRC
    out=$d/$1.out
    t0=$(date +%s)
    timeout "${QTTS_EMU_TIMEOUT:-1800}" bochs -q -f "$d/bochsrc" -rc "$d/cont.rc" </dev/null >"$out" 2>&1
    rc=$?
    echo "# Bochs ran $1 for $(($(date +%s) - t0)) s ($2)"
    grep -a '^== emu:' "$out" | sed 's/^/# /'
    if [ "$1" = test_kernels ]; then
        grep -a -e '^ok .*avx512' -e '^SKIP .*avx512' -e '^FAIL ' "$out" | sed 's/^\(ok\|SKIP\|FAIL\) /\1 bochs:/'
        grep -a '^# ' "$out" | grep -a avx512 | sed 's/^# /# bochs: /'
    else
        grep -a -e '^ok ' -e '^SKIP ' -e '^FAIL ' "$out" | sed "s/^\(ok\|SKIP\|FAIL\) /\1 bochs:$1:/"
    fi
    summary=$(grep -a '^# [0-9]* passed, [0-9]* failed' "$out" | tail -1)
    [ "$rc" -eq 124 ] && fail "Bochs ran $1 past ${QTTS_EMU_TIMEOUT:-1800} s (a hang: $out)"
    if ! grep -aq '^== emu: exit 0$' "$out"; then
        why=$(grep -a '^== emu:' "$out" | grep -av -e XCR0 -e starting | tail -2 | tr '\n' ' ')
        fail "$1 did not exit with status 0: ${why:-no line from the kernel} (see $out)"
    fi
    case "$summary" in
    "# "*" passed, 0 failed"*) ;;
    *) fail "$1 under Bochs: ${summary:-no summary line}" ;;
    esac
}

emu test_kernels "QTTS_KERNEL_TESTS=$groups"
grep -aq '^ok kernels_avx512$' "$d/test_kernels.out" || fail "test_kernels found no AVX-512 table under Bochs"
emu test_ops ""
echo "ok $name"
