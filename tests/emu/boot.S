/* boot sector: A20 on, flat 32-bit protected mode, jump to the kernel that
 * Bochs loaded at 1 MiB (optramimage) */
.code16
.globl _start
_start:
    cli
    xor %ax, %ax
    mov %ax, %ds
    mov %ax, %ss
    mov $0x7c00, %sp
    inb $0x92, %al
    or $2, %al
    and $0xfe, %al
    outb %al, $0x92
    lgdtl gdtr
    mov %cr0, %eax
    or $1, %eax
    mov %eax, %cr0
    ljmpl $0x08, $0x100000
.p2align 3
gdt:
    .quad 0
    .quad 0x00cf9a000000ffff
    .quad 0x00cf92000000ffff
gdtr:
    .word 23
    .long gdt
.org 510
    .word 0xaa55
