/* The kernel's assembly (tests/emu/kernel.c has the rest). The 32-bit entry
 * at 1 MiB, where boot.S jumps: identity-map 4 GiB with 2 MiB pages that ring
 * 3 may use, enter long mode with SYSCALL enabled, load a GDT with ring-3
 * segments and a TSS (the stack for exceptions taken in ring 3), turn on the
 * SSE/AVX state, call kmain. Then the SYSCALL entry, which saves the calling
 * thread's registers and resumes the one kmain's sys_entry returns, and the
 * CPU exception stubs. */
.section .text.entry, "ax"
.code32
.globl _start32
_start32:
    mov $0x10, %ax
    mov %ax, %ds
    mov %ax, %es
    mov %ax, %ss
    mov $__bss_start, %edi
    mov $__bss_end, %ecx
    sub %edi, %ecx
    xor %eax, %eax
    cld
    rep stosb
    mov $boot_stack_top, %esp
    /* pml4[0] -> pdpt; pdpt[0..3] -> pd + i 4 KiB; pd[j] = j 2 MiB, large */
    mov $pdpt, %eax
    or $7, %eax
    mov %eax, pml4
    xor %ecx, %ecx
1:  mov %ecx, %eax
    shl $12, %eax
    add $pd, %eax
    or $7, %eax
    mov %eax, pdpt(,%ecx,8)
    inc %ecx
    cmp $4, %ecx
    jne 1b
    xor %ecx, %ecx
2:  mov %ecx, %eax
    shl $21, %eax
    or $0x87, %eax
    mov %eax, pd(,%ecx,8)
    mov %ecx, %eax
    shr $11, %eax
    mov %eax, pd+4(,%ecx,8)
    inc %ecx
    cmp $2048, %ecx
    jne 2b
    mov $pml4, %eax
    mov %eax, %cr3
    mov %cr4, %eax
    or $0x20, %eax
    mov %eax, %cr4
    mov $0xC0000080, %ecx
    rdmsr
    or $0x101, %eax
    wrmsr
    mov %cr0, %eax
    or $0x80000000, %eax
    mov %eax, %cr0
    lgdt gdt64r
    ljmp $0x08, $long_entry
.code64
long_entry:
    mov $0x10, %ax
    mov %ax, %ds
    mov %ax, %es
    mov %ax, %ss
    xor %ax, %ax
    mov %ax, %fs
    mov %ax, %gs
    lea boot_stack_top(%rip), %rsp
    /* the TSS descriptor: RSP0 for exceptions taken in ring 3 */
    lea tss(%rip), %rax
    lea kstack_top(%rip), %rcx
    mov %rcx, 4(%rax)
    mov %rax, %rcx
    shl $16, %rcx
    mov $0xffffff0000, %rdx
    and %rdx, %rcx
    mov %rax, %rdx
    shr $24, %rdx
    shl $56, %rdx
    or %rdx, %rcx
    mov $0x0000890000000067, %rdx
    or %rdx, %rcx
    mov %rcx, gdt64+0x28(%rip)
    shr $32, %rax
    mov %rax, gdt64+0x30(%rip)
    mov $0x28, %ax
    ltr %ax
    mov %cr0, %rax
    and $~4, %rax
    or $2, %rax
    mov %rax, %cr0
    mov %cr4, %rax
    or $((1 << 9) | (1 << 10) | (1 << 18)), %rax
    mov %rax, %cr4
    fninit
    call kmain
3:  hlt
    jmp 3b

/* SYSCALL: switch to the kernel stack, push an iret frame and the registers
 * (struct ctx), call sys_entry(ctx) which returns the context to resume. */
.globl syscall_entry
syscall_entry:
    mov %rsp, user_rsp(%rip)
    lea kstack_top(%rip), %rsp
    pushq $0x1b
    pushq user_rsp(%rip)
    push %r11
    pushq $0x23
    push %rcx
    push %rax
    push %rbx
    push %rcx
    push %rdx
    push %rsi
    push %rdi
    push %rbp
    push %r8
    push %r9
    push %r10
    push %r11
    push %r12
    push %r13
    push %r14
    push %r15
    mov %rsp, %rdi
    call sys_entry
.globl ctx_resume
ctx_resume:
    mov %rax, %rsp
    pop %r15
    pop %r14
    pop %r13
    pop %r12
    pop %r11
    pop %r10
    pop %r9
    pop %r8
    pop %rbp
    pop %rdi
    pop %rsi
    pop %rdx
    pop %rcx
    pop %rbx
    pop %rax
    iretq

/* exceptions: push the vector (and a 0 where the CPU pushes no error code) */
.macro EXC n, err
.globl exc\n
exc\n:
.if \err == 0
    pushq $0
.endif
    pushq $\n
    jmp exc_common
.endm
EXC 0,0; EXC 1,0; EXC 2,0; EXC 3,0; EXC 4,0; EXC 5,0; EXC 6,0; EXC 7,0
EXC 8,1; EXC 9,0; EXC 10,1; EXC 11,1; EXC 12,1; EXC 13,1; EXC 14,1; EXC 15,0
EXC 16,0; EXC 17,1; EXC 18,0; EXC 19,0; EXC 20,0
/* from ring 3 the CPU is on the TSS's RSP0 already, below the frame */
exc_common:
    mov %rsp, %rdi
    and $-16, %rsp
    call exc_entry
4:  hlt
    jmp 4b

.data
.p2align 3
/* kernel code and data, user data and code (ring 3), the TSS (filled above) */
gdt64:
    .quad 0
    .quad 0x00af9a000000ffff
    .quad 0x00cf92000000ffff
    .quad 0x00cff2000000ffff
    .quad 0x00affa000000ffff
    .quad 0, 0
gdt64r:
    .word 55
    .quad gdt64
.p2align 4
tss:
    .space 104

.section .bss
.p2align 12
pml4: .space 4096
pdpt: .space 4096
pd: .space 4 * 4096
.p2align 4
    .space 65536
boot_stack_top:
    .space 65536
kstack_top:
user_rsp: .quad 0
.text
.globl start_thread
start_thread:
    mov %rdi, %rax
    jmp ctx_resume
