//! A classic-BPF interpreter for seccomp filters, used as a test oracle.
//!
//! [`run`] accepts exactly the programs the kernel accepts in
//! `seccomp(SECCOMP_SET_MODE_FILTER)` and evaluates them against a
//! [`SeccompData`]. Before executing anything it repeats the kernel's load-time
//! checks (`bpf_check_classic()` in net/core/filter.c followed by
//! `seccomp_check_filter()` in kernel/seccomp.c), so a program the kernel would
//! refuse with `EINVAL` is an error here even when the offending instruction is
//! never reached:
//!
//! * 1 to 4096 instructions, the last one a `RET`;
//! * only the opcodes seccomp allows: `LD W ABS` (32-bit aligned, inside
//!   `struct seccomp_data`), `LD/LDX W LEN`, `LD/LDX IMM`, `LD/LDX MEM`,
//!   `ST`, `STX`, `ALU` `ADD SUB MUL DIV AND OR XOR LSH RSH` (K and X) and
//!   `NEG`, `JMP` `JA JEQ JGT JGE JSET` (K and X), `RET K/A`, `MISC TAX/TXA`.
//!   `ALU MOD`, byte/half-word and indirect loads, `LDX MSH` and `RET X` are
//!   valid classic BPF but rejected by seccomp, so they are unknown here;
//! * jump targets inside the program, scratch slots below 16, no division by a
//!   constant zero, no shift by a constant of 32 or more;
//! * no scratch slot read before it is written on every path leading there.
//!
//! One deliberate difference at run time: dividing by `X == 0` is an error
//! ([`InterpError::DivisionByZero`]), whereas the kernel silently makes the
//! filter return 0 (`SECCOMP_RET_KILL_THREAD`). Shifts by `X` use the low five
//! bits of `X`, as the kernel does.

use std::fmt;

use seccompiler::sock_filter;

/// `BPF_MAXINSNS`: the longest program the kernel accepts.
pub const MAX_INSNS: usize = 4096;
/// `BPF_MEMWORDS`: number of scratch memory slots.
pub const MEM_WORDS: usize = 16;
/// `sizeof(struct seccomp_data)`.
pub const SECCOMP_DATA_SIZE: u32 = 64;

// Instruction classes.
const BPF_LD: u16 = 0x00;
const BPF_LDX: u16 = 0x01;
const BPF_ST: u16 = 0x02;
const BPF_STX: u16 = 0x03;
const BPF_ALU: u16 = 0x04;
const BPF_JMP: u16 = 0x05;
const BPF_RET: u16 = 0x06;
const BPF_MISC: u16 = 0x07;
// Load sizes and modes.
const BPF_W: u16 = 0x00;
const BPF_IMM: u16 = 0x00;
const BPF_ABS: u16 = 0x20;
const BPF_MEM: u16 = 0x60;
const BPF_LEN: u16 = 0x80;
// ALU operations.
const BPF_ADD: u16 = 0x00;
const BPF_SUB: u16 = 0x10;
const BPF_MUL: u16 = 0x20;
const BPF_DIV: u16 = 0x30;
const BPF_OR: u16 = 0x40;
const BPF_AND: u16 = 0x50;
const BPF_LSH: u16 = 0x60;
const BPF_RSH: u16 = 0x70;
const BPF_NEG: u16 = 0x80;
const BPF_XOR: u16 = 0xa0;
// Jump tests.
const BPF_JA: u16 = 0x00;
const BPF_JEQ: u16 = 0x10;
const BPF_JGT: u16 = 0x20;
const BPF_JGE: u16 = 0x30;
const BPF_JSET: u16 = 0x40;
// Operand sources.
const BPF_K: u16 = 0x00;
const BPF_X: u16 = 0x08;
// Return value sources.
const BPF_A: u16 = 0x10;
// MISC operations.
const BPF_TAX: u16 = 0x00;
const BPF_TXA: u16 = 0x80;

/// The kernel's `struct seccomp_data`: what a seccomp filter inspects.
///
/// Layout (64 bytes, little-endian words): `nr` at offset 0, `arch` at 4,
/// `instruction_pointer` at 8, `args[i]` at `16 + 8 * i` (low 32 bits) and
/// `20 + 8 * i` (high 32 bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SeccompData {
    /// System call number.
    pub nr: i32,
    /// `AUDIT_ARCH_*` value of the calling convention.
    pub arch: u32,
    /// Address of the system call instruction.
    pub instruction_pointer: u64,
    /// System call arguments.
    pub args: [u64; 6],
}

impl SeccompData {
    /// The 32-bit word a `BPF_LD | BPF_W | BPF_ABS` at `offset` loads, or `None`
    /// if the offset is unaligned or outside the structure.
    pub fn word(&self, offset: u32) -> Option<u32> {
        if offset >= SECCOMP_DATA_SIZE || offset % 4 != 0 {
            return None;
        }
        let low = |v: u64| (v & 0xffff_ffff) as u32;
        let high = |v: u64| (v >> 32) as u32;
        Some(match offset {
            0 => u32::from_ne_bytes(self.nr.to_ne_bytes()),
            4 => self.arch,
            8 => low(self.instruction_pointer),
            12 => high(self.instruction_pointer),
            _ => {
                let rel = offset - 16;
                let arg = self.args[(rel / 8) as usize];
                if rel % 8 == 0 {
                    low(arg)
                } else {
                    high(arg)
                }
            }
        })
    }
}

/// Why a program was refused or could not be evaluated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InterpError {
    /// The program has no instructions.
    Empty,
    /// The program has more than [`MAX_INSNS`] instructions.
    TooLong { len: usize },
    /// An opcode seccomp does not accept.
    UnknownOpcode { pc: usize, code: u16 },
    /// A `seccomp_data` load that is unaligned or out of bounds.
    BadLoad { pc: usize, offset: u32 },
    /// A scratch memory access to a slot outside `0..16`.
    BadMemSlot { pc: usize, slot: u32 },
    /// A scratch slot read before being written on some path to it.
    UninitializedMemory { pc: usize, slot: u32 },
    /// A jump whose target is past the last instruction.
    JumpOutOfRange { pc: usize },
    /// Division by a constant zero (load time) or by `X == 0` (run time).
    DivisionByZero { pc: usize },
    /// A shift by a constant of 32 or more.
    ShiftTooLarge { pc: usize, shift: u32 },
    /// The last instruction is not a return, or execution ran past the end.
    FellOffEnd,
}

impl fmt::Display for InterpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::Empty => write!(f, "empty BPF program"),
            Self::TooLong { len } => {
                write!(f, "BPF program has {len} instructions (max {MAX_INSNS})")
            }
            Self::UnknownOpcode { pc, code } => {
                write!(f, "insn {pc}: opcode {code:#06x} not allowed in seccomp")
            }
            Self::BadLoad { pc, offset } => write!(
                f,
                "insn {pc}: load at offset {offset} is unaligned or outside seccomp_data"
            ),
            Self::BadMemSlot { pc, slot } => {
                write!(f, "insn {pc}: scratch slot {slot} out of range")
            }
            Self::UninitializedMemory { pc, slot } => {
                write!(
                    f,
                    "insn {pc}: scratch slot {slot} may be read before written"
                )
            }
            Self::JumpOutOfRange { pc } => write!(f, "insn {pc}: jump out of range"),
            Self::DivisionByZero { pc } => write!(f, "insn {pc}: division by zero"),
            Self::ShiftTooLarge { pc, shift } => write!(f, "insn {pc}: shift by {shift}"),
            Self::FellOffEnd => write!(f, "BPF program does not end in a return"),
        }
    }
}

impl std::error::Error for InterpError {}

// Whole opcodes with special load-time checks.
const LD_W_ABS: u16 = BPF_LD | BPF_W | BPF_ABS;
const LD_MEM: u16 = BPF_LD | BPF_MEM;
const LDX_MEM: u16 = BPF_LDX | BPF_MEM;
const ALU_DIV_K: u16 = BPF_ALU | BPF_DIV | BPF_K;
const ALU_LSH_K: u16 = BPF_ALU | BPF_LSH | BPF_K;
const ALU_RSH_K: u16 = BPF_ALU | BPF_RSH | BPF_K;
const JMP_JA: u16 = BPF_JMP | BPF_JA;
const RET_K: u16 = BPF_RET | BPF_K;
const RET_A: u16 = BPF_RET | BPF_A;

/// Every opcode `seccomp_check_filter()` lets through (`LD W LEN` and
/// `LDX W LEN` are rewritten by the kernel into immediate loads of 64).
const ALLOWED: [u16; 41] = [
    LD_W_ABS,
    BPF_LD | BPF_W | BPF_LEN,
    BPF_LDX | BPF_W | BPF_LEN,
    BPF_LD | BPF_IMM,
    BPF_LDX | BPF_IMM,
    LD_MEM,
    LDX_MEM,
    BPF_ST,
    BPF_STX,
    BPF_ALU | BPF_ADD | BPF_K,
    BPF_ALU | BPF_ADD | BPF_X,
    BPF_ALU | BPF_SUB | BPF_K,
    BPF_ALU | BPF_SUB | BPF_X,
    BPF_ALU | BPF_MUL | BPF_K,
    BPF_ALU | BPF_MUL | BPF_X,
    ALU_DIV_K,
    BPF_ALU | BPF_DIV | BPF_X,
    BPF_ALU | BPF_AND | BPF_K,
    BPF_ALU | BPF_AND | BPF_X,
    BPF_ALU | BPF_OR | BPF_K,
    BPF_ALU | BPF_OR | BPF_X,
    BPF_ALU | BPF_XOR | BPF_K,
    BPF_ALU | BPF_XOR | BPF_X,
    ALU_LSH_K,
    BPF_ALU | BPF_LSH | BPF_X,
    ALU_RSH_K,
    BPF_ALU | BPF_RSH | BPF_X,
    BPF_ALU | BPF_NEG,
    JMP_JA,
    BPF_JMP | BPF_JEQ | BPF_K,
    BPF_JMP | BPF_JEQ | BPF_X,
    BPF_JMP | BPF_JGT | BPF_K,
    BPF_JMP | BPF_JGT | BPF_X,
    BPF_JMP | BPF_JGE | BPF_K,
    BPF_JMP | BPF_JGE | BPF_X,
    BPF_JMP | BPF_JSET | BPF_K,
    BPF_JMP | BPF_JSET | BPF_X,
    RET_K,
    RET_A,
    BPF_MISC | BPF_TAX,
    BPF_MISC | BPF_TXA,
];

/// A conditional jump (only meaningful for allowed opcodes).
fn is_cond_jump(code: u16) -> bool {
    code & 0x07 == BPF_JMP && code != JMP_JA
}

/// Repeat the kernel's load-time checks. [`run`] calls this first.
pub fn validate(prog: &[sock_filter]) -> Result<(), InterpError> {
    let len = prog.len();
    if len == 0 {
        return Err(InterpError::Empty);
    }
    if len > MAX_INSNS {
        return Err(InterpError::TooLong { len });
    }
    for (pc, insn) in prog.iter().enumerate() {
        let (code, k) = (insn.code, insn.k);
        if !ALLOWED.contains(&code) {
            return Err(InterpError::UnknownOpcode { pc, code });
        }
        // Instructions after this one: every jump must land among them.
        let remaining = len - pc - 1;
        match code {
            LD_W_ABS if k >= SECCOMP_DATA_SIZE || k % 4 != 0 => {
                return Err(InterpError::BadLoad { pc, offset: k });
            }
            ALU_DIV_K if k == 0 => return Err(InterpError::DivisionByZero { pc }),
            ALU_LSH_K | ALU_RSH_K if k >= 32 => {
                return Err(InterpError::ShiftTooLarge { pc, shift: k });
            }
            LD_MEM | LDX_MEM | BPF_ST | BPF_STX if k as usize >= MEM_WORDS => {
                return Err(InterpError::BadMemSlot { pc, slot: k });
            }
            JMP_JA if k as usize >= remaining => {
                return Err(InterpError::JumpOutOfRange { pc });
            }
            c if is_cond_jump(c)
                && (usize::from(insn.jt) >= remaining || usize::from(insn.jf) >= remaining) =>
            {
                return Err(InterpError::JumpOutOfRange { pc });
            }
            _ => {}
        }
    }
    if !matches!(prog[len - 1].code, RET_K | RET_A) {
        return Err(InterpError::FellOffEnd);
    }
    check_loads_and_stores(prog)
}

/// The kernel's `check_load_and_stores()`: every scratch read must follow a
/// write of that slot on all paths. Jumps only go forward, so one pass in
/// program order suffices.
fn check_loads_and_stores(prog: &[sock_filter]) -> Result<(), InterpError> {
    let mut masks = vec![u16::MAX; prog.len()];
    let mut valid: u16 = 0;
    for (pc, insn) in prog.iter().enumerate() {
        valid &= masks[pc];
        match insn.code {
            BPF_ST | BPF_STX => valid |= 1 << insn.k,
            LD_MEM | LDX_MEM if valid & (1 << insn.k) == 0 => {
                return Err(InterpError::UninitializedMemory { pc, slot: insn.k });
            }
            JMP_JA => {
                masks[pc + 1 + insn.k as usize] &= valid;
                valid = u16::MAX;
            }
            c if is_cond_jump(c) => {
                masks[pc + 1 + usize::from(insn.jt)] &= valid;
                masks[pc + 1 + usize::from(insn.jf)] &= valid;
                valid = u16::MAX;
            }
            _ => {}
        }
    }
    Ok(())
}

/// Run `prog` on `data` and return the filter's result (`SECCOMP_RET_*`).
pub fn run(prog: &[sock_filter], data: &SeccompData) -> Result<u32, InterpError> {
    validate(prog)?;
    let mut a: u32 = 0;
    let mut x: u32 = 0;
    let mut mem = [0u32; MEM_WORDS];
    let mut pc = 0usize;
    loop {
        let insn = prog.get(pc).ok_or(InterpError::FellOffEnd)?;
        let (code, k) = (insn.code, insn.k);
        let mut next = pc + 1;
        match code & 0x07 {
            BPF_LD | BPF_LDX => {
                let value = match code & 0xe0 {
                    BPF_ABS => data.word(k).ok_or(InterpError::BadLoad { pc, offset: k })?,
                    BPF_LEN => SECCOMP_DATA_SIZE,
                    BPF_MEM => *mem
                        .get(k as usize)
                        .ok_or(InterpError::BadMemSlot { pc, slot: k })?,
                    _ => k, // BPF_IMM
                };
                if code & 0x07 == BPF_LD {
                    a = value;
                } else {
                    x = value;
                }
            }
            BPF_ST | BPF_STX => {
                let slot = mem
                    .get_mut(k as usize)
                    .ok_or(InterpError::BadMemSlot { pc, slot: k })?;
                *slot = if code == BPF_ST { a } else { x };
            }
            BPF_ALU => {
                let src = if code & BPF_X != 0 { x } else { k };
                a = match code & 0xf0 {
                    BPF_ADD => a.wrapping_add(src),
                    BPF_SUB => a.wrapping_sub(src),
                    BPF_MUL => a.wrapping_mul(src),
                    BPF_DIV => a
                        .checked_div(src)
                        .ok_or(InterpError::DivisionByZero { pc })?,
                    BPF_OR => a | src,
                    BPF_AND => a & src,
                    // wrapping_sh* use the low five bits, like the kernel.
                    BPF_LSH => a.wrapping_shl(src),
                    BPF_RSH => a.wrapping_shr(src),
                    BPF_NEG => a.wrapping_neg(),
                    BPF_XOR => a ^ src,
                    _ => return Err(InterpError::UnknownOpcode { pc, code }),
                };
            }
            BPF_JMP => {
                let src = if code & BPF_X != 0 { x } else { k };
                let op = code & 0xf0;
                if op == BPF_JA {
                    next = next
                        .checked_add(k as usize)
                        .ok_or(InterpError::JumpOutOfRange { pc })?;
                } else {
                    let taken = match op {
                        BPF_JEQ => a == src,
                        BPF_JGT => a > src,
                        BPF_JGE => a >= src,
                        BPF_JSET => a & src != 0,
                        _ => return Err(InterpError::UnknownOpcode { pc, code }),
                    };
                    next += usize::from(if taken { insn.jt } else { insn.jf });
                }
                if next >= prog.len() {
                    return Err(InterpError::JumpOutOfRange { pc });
                }
            }
            BPF_RET => return Ok(if code & 0x18 == BPF_A { a } else { k }),
            BPF_MISC => {
                if code & 0xf8 == BPF_TXA {
                    a = x;
                } else {
                    x = a;
                }
            }
            _ => return Err(InterpError::UnknownOpcode { pc, code }),
        }
        pc = next;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RET_ALLOW: u32 = 0x7fff_0000;
    const RET_ERRNO: u32 = 0x0005_0000;
    const RET_KILL_PROCESS: u32 = 0x8000_0000;
    const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;
    const AUDIT_ARCH_AARCH64: u32 = 0xc000_00b7;

    fn stmt(code: u16, k: u32) -> sock_filter {
        sock_filter {
            code,
            jt: 0,
            jf: 0,
            k,
        }
    }

    fn jump(code: u16, k: u32, jt: u8, jf: u8) -> sock_filter {
        sock_filter { code, jt, jf, k }
    }

    fn ld_abs(offset: u32) -> sock_filter {
        stmt(BPF_LD | BPF_W | BPF_ABS, offset)
    }

    fn ld_imm(k: u32) -> sock_filter {
        stmt(BPF_LD | BPF_IMM, k)
    }

    fn ldx_imm(k: u32) -> sock_filter {
        stmt(BPF_LDX | BPF_IMM, k)
    }

    fn ret_k(k: u32) -> sock_filter {
        stmt(BPF_RET | BPF_K, k)
    }

    fn ret_a() -> sock_filter {
        stmt(BPF_RET | BPF_A, 0)
    }

    fn data() -> SeccompData {
        SeccompData {
            nr: 59,
            arch: AUDIT_ARCH_X86_64,
            instruction_pointer: 0x1122_3344_5566_7788,
            args: [
                0x0000_0001_0000_0002,
                0xffff_ffff_ffff_ffff,
                0,
                0xdead_beef,
                0x8000_0000_0000_0000,
                0x0123_4567_89ab_cdef,
            ],
        }
    }

    /// Load A from `offset` and return it.
    fn load(offset: u32) -> Result<u32, InterpError> {
        run(&[ld_abs(offset), ret_a()], &data())
    }

    /// `A = a; X = x; A = A op X` (or `A op K` with `k`), return A.
    fn alu(op: u16, a: u32, operand: u32) -> (Result<u32, InterpError>, Result<u32, InterpError>) {
        let with_k = run(
            &[ld_imm(a), stmt(BPF_ALU | op | BPF_K, operand), ret_a()],
            &data(),
        );
        let with_x = run(
            &[
                ld_imm(a),
                ldx_imm(operand),
                stmt(BPF_ALU | op | BPF_X, 0),
                ret_a(),
            ],
            &data(),
        );
        (with_k, with_x)
    }

    fn alu_both(op: u16, a: u32, operand: u32) -> u32 {
        let (k, x) = alu(op, a, operand);
        assert_eq!(k, x, "op {op:#x} K and X disagree");
        k.unwrap()
    }

    /// `A = a; X = operand; if A op operand then 1 else 2` with K and with X.
    fn branch(op: u16, a: u32, operand: u32) -> u32 {
        let with_k = run(
            &[
                ld_imm(a),
                jump(BPF_JMP | op | BPF_K, operand, 0, 1),
                ret_k(1),
                ret_k(2),
            ],
            &data(),
        )
        .unwrap();
        let with_x = run(
            &[
                ld_imm(a),
                ldx_imm(operand),
                jump(BPF_JMP | op | BPF_X, 0, 0, 1),
                ret_k(1),
                ret_k(2),
            ],
            &data(),
        )
        .unwrap();
        assert_eq!(with_k, with_x, "jump {op:#x} K and X disagree");
        with_k
    }

    #[test]
    fn return_constant_and_accumulator() {
        assert_eq!(run(&[ret_k(RET_ALLOW)], &data()), Ok(RET_ALLOW));
        assert_eq!(run(&[ret_a()], &data()), Ok(0), "A starts at 0");
        assert_eq!(run(&[ld_imm(42), ret_a()], &data()), Ok(42));
    }

    #[test]
    fn seccomp_data_layout() {
        assert_eq!(load(0), Ok(59));
        assert_eq!(load(4), Ok(AUDIT_ARCH_X86_64));
        assert_eq!(load(8), Ok(0x5566_7788));
        assert_eq!(load(12), Ok(0x1122_3344));
        assert_eq!(load(16), Ok(2));
        assert_eq!(load(20), Ok(1));
        assert_eq!(load(24), Ok(0xffff_ffff));
        assert_eq!(load(28), Ok(0xffff_ffff));
        assert_eq!(load(32), Ok(0));
        assert_eq!(load(36), Ok(0));
        assert_eq!(load(40), Ok(0xdead_beef));
        assert_eq!(load(44), Ok(0));
        assert_eq!(load(48), Ok(0));
        assert_eq!(load(52), Ok(0x8000_0000));
        assert_eq!(load(56), Ok(0x89ab_cdef));
        assert_eq!(load(60), Ok(0x0123_4567));
        let negative = SeccompData { nr: -1, ..data() };
        assert_eq!(run(&[ld_abs(0), ret_a()], &negative), Ok(u32::MAX));
    }

    #[test]
    fn bad_loads() {
        for offset in [1, 2, 3, 6, 62, 64, 68, 0x1000, 0xffff_f000, u32::MAX] {
            assert_eq!(
                load(offset),
                Err(InterpError::BadLoad { pc: 0, offset }),
                "offset {offset}"
            );
        }
        assert_eq!(data().word(64), None);
        assert_eq!(data().word(2), None);
        // Rejected even when never executed, as the kernel does.
        assert_eq!(
            run(&[ret_k(0), ld_abs(66), ret_a()], &data()),
            Err(InterpError::BadLoad { pc: 1, offset: 66 })
        );
    }

    #[test]
    fn length_loads() {
        let p = [stmt(BPF_LD | BPF_W | BPF_LEN, 0), ret_a()];
        assert_eq!(run(&p, &data()), Ok(64));
        let p = [
            stmt(BPF_LDX | BPF_W | BPF_LEN, 7),
            stmt(BPF_MISC | BPF_TXA, 0),
            ret_a(),
        ];
        assert_eq!(run(&p, &data()), Ok(64));
    }

    #[test]
    fn alu_operations() {
        assert_eq!(alu_both(BPF_ADD, 5, 7), 12);
        assert_eq!(alu_both(BPF_ADD, u32::MAX, 2), 1);
        assert_eq!(alu_both(BPF_SUB, 5, 7), u32::MAX - 1);
        assert_eq!(alu_both(BPF_MUL, 0x1_0001, 0x1_0001), 0x2_0001);
        assert_eq!(alu_both(BPF_DIV, 100, 7), 14);
        assert_eq!(alu_both(BPF_DIV, u32::MAX, 1), u32::MAX);
        assert_eq!(alu_both(BPF_AND, 0xf0f0, 0xff00), 0xf000);
        assert_eq!(alu_both(BPF_OR, 0xf0f0, 0x0f00), 0xfff0);
        assert_eq!(alu_both(BPF_XOR, 0xf0f0, 0xff00), 0x0ff0);
        assert_eq!(alu_both(BPF_LSH, 0x8000_0001, 1), 2);
        assert_eq!(alu_both(BPF_LSH, 1, 31), 0x8000_0000);
        assert_eq!(alu_both(BPF_RSH, 0x8000_0000, 31), 1);
        assert_eq!(alu_both(BPF_RSH, 0xff, 0), 0xff);
        let neg = [ld_imm(5), stmt(BPF_ALU | BPF_NEG, 0), ret_a()];
        assert_eq!(run(&neg, &data()), Ok(5u32.wrapping_neg()));
        let neg = [ld_imm(0), stmt(BPF_ALU | BPF_NEG, 0), ret_a()];
        assert_eq!(run(&neg, &data()), Ok(0));
    }

    #[test]
    fn shifts_by_x_use_low_five_bits() {
        let (k, x) = alu(BPF_LSH, 1, 33);
        assert_eq!(k, Err(InterpError::ShiftTooLarge { pc: 1, shift: 33 }));
        assert_eq!(x, Ok(2));
        let (k, x) = alu(BPF_RSH, 0x8000_0000, 32);
        assert_eq!(k, Err(InterpError::ShiftTooLarge { pc: 1, shift: 32 }));
        assert_eq!(x, Ok(0x8000_0000));
    }

    #[test]
    fn division_by_zero() {
        let (k, x) = alu(BPF_DIV, 10, 0);
        assert_eq!(k, Err(InterpError::DivisionByZero { pc: 1 }));
        assert_eq!(x, Err(InterpError::DivisionByZero { pc: 2 }));
        // Division by X is only an error when it happens.
        let p = [
            ldx_imm(0),
            jump(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 1),
            ret_k(7),
            stmt(BPF_ALU | BPF_DIV | BPF_X, 0),
            ret_a(),
        ];
        assert_eq!(run(&p, &data()), Ok(7));
        // A constant zero divisor is refused at load time even if unreachable.
        let p = [ret_k(0), stmt(BPF_ALU | BPF_DIV | BPF_K, 0), ret_a()];
        assert_eq!(run(&p, &data()), Err(InterpError::DivisionByZero { pc: 1 }));
    }

    #[test]
    fn conditional_jumps() {
        assert_eq!(branch(BPF_JEQ, 5, 5), 1);
        assert_eq!(branch(BPF_JEQ, 5, 6), 2);
        assert_eq!(branch(BPF_JGT, 6, 5), 1);
        assert_eq!(branch(BPF_JGT, 5, 5), 2);
        assert_eq!(branch(BPF_JGT, 0x8000_0000, 1), 1, "unsigned compare");
        assert_eq!(branch(BPF_JGE, 5, 5), 1);
        assert_eq!(branch(BPF_JGE, 4, 5), 2);
        assert_eq!(branch(BPF_JGE, u32::MAX, 0), 1);
        assert_eq!(branch(BPF_JSET, 0b1010, 0b0010), 1);
        assert_eq!(branch(BPF_JSET, 0b1010, 0b0101), 2);
        assert_eq!(branch(BPF_JSET, 0, u32::MAX), 2);
    }

    #[test]
    fn unconditional_jump() {
        let p = [stmt(BPF_JMP | BPF_JA, 2), ret_k(1), ret_k(2), ret_k(3)];
        assert_eq!(run(&p, &data()), Ok(3));
        let p = [stmt(BPF_JMP | BPF_JA, 0), ret_k(1)];
        assert_eq!(run(&p, &data()), Ok(1));
    }

    #[test]
    fn jumps_out_of_range() {
        let p = [stmt(BPF_JMP | BPF_JA, 1), ret_k(1)];
        assert_eq!(run(&p, &data()), Err(InterpError::JumpOutOfRange { pc: 0 }));
        let p = [stmt(BPF_JMP | BPF_JA, u32::MAX), ret_k(1)];
        assert_eq!(run(&p, &data()), Err(InterpError::JumpOutOfRange { pc: 0 }));
        let p = [jump(BPF_JMP | BPF_JEQ | BPF_K, 0, 1, 0), ret_k(1)];
        assert_eq!(run(&p, &data()), Err(InterpError::JumpOutOfRange { pc: 0 }));
        let p = [jump(BPF_JMP | BPF_JGT | BPF_X, 0, 0, 255), ret_k(1)];
        assert_eq!(run(&p, &data()), Err(InterpError::JumpOutOfRange { pc: 0 }));
        // Even on a branch that would not be taken, and in unreachable code.
        let p = [
            ret_k(0),
            jump(BPF_JMP | BPF_JSET | BPF_K, 0, 0, 2),
            ret_k(1),
        ];
        assert_eq!(run(&p, &data()), Err(InterpError::JumpOutOfRange { pc: 1 }));
        // The largest in-range offsets are fine.
        let p = [jump(BPF_JMP | BPF_JEQ | BPF_K, 0, 1, 1), ret_k(1), ret_k(2)];
        assert_eq!(run(&p, &data()), Ok(2));
    }

    #[test]
    fn register_transfers() {
        let p = [
            ld_imm(9),
            stmt(BPF_MISC | BPF_TAX, 0),
            ld_imm(1),
            stmt(BPF_MISC | BPF_TXA, 0),
            ret_a(),
        ];
        assert_eq!(run(&p, &data()), Ok(9));
        let p = [
            ldx_imm(3),
            ld_abs(0),
            stmt(BPF_ALU | BPF_ADD | BPF_X, 0),
            ret_a(),
        ];
        assert_eq!(run(&p, &data()), Ok(62));
    }

    #[test]
    fn scratch_memory() {
        let p = [
            ld_imm(11),
            stmt(BPF_ST, 0),
            ldx_imm(22),
            stmt(BPF_STX, 15),
            ld_imm(0),
            ldx_imm(0),
            stmt(BPF_LDX | BPF_MEM, 0),
            stmt(BPF_LD | BPF_MEM, 15),
            stmt(BPF_ALU | BPF_SUB | BPF_X, 0),
            ret_a(),
        ];
        assert_eq!(run(&p, &data()), Ok(11));
        for code in [BPF_ST, BPF_STX, BPF_LD | BPF_MEM, BPF_LDX | BPF_MEM] {
            let p = [stmt(code, 16), ret_a()];
            assert_eq!(
                run(&p, &data()),
                Err(InterpError::BadMemSlot { pc: 0, slot: 16 }),
                "code {code:#x}"
            );
        }
    }

    #[test]
    fn uninitialized_scratch_reads() {
        let p = [stmt(BPF_LD | BPF_MEM, 3), ret_a()];
        assert_eq!(
            run(&p, &data()),
            Err(InterpError::UninitializedMemory { pc: 0, slot: 3 })
        );
        // Written on one path only.
        let p = [
            ld_abs(0),
            jump(BPF_JMP | BPF_JEQ | BPF_K, 59, 0, 1),
            stmt(BPF_ST, 3),
            stmt(BPF_LDX | BPF_MEM, 3),
            ret_a(),
        ];
        assert_eq!(
            run(&p, &data()),
            Err(InterpError::UninitializedMemory { pc: 3, slot: 3 })
        );
        // Written on every path.
        let p = [
            ld_abs(0),
            stmt(BPF_ST, 3),
            jump(BPF_JMP | BPF_JEQ | BPF_K, 59, 0, 1),
            stmt(BPF_ST, 4),
            stmt(BPF_LD | BPF_MEM, 3),
            ret_a(),
        ];
        assert_eq!(run(&p, &data()), Ok(59));
        // A different slot does not count.
        let p = [stmt(BPF_ST, 1), stmt(BPF_LD | BPF_MEM, 2), ret_a()];
        assert_eq!(
            run(&p, &data()),
            Err(InterpError::UninitializedMemory { pc: 1, slot: 2 })
        );
    }

    #[test]
    fn program_length_limits() {
        assert_eq!(run(&[], &data()), Err(InterpError::Empty));
        let mut p = vec![stmt(BPF_ALU | BPF_ADD | BPF_K, 1); MAX_INSNS - 1];
        p.push(ret_a());
        assert_eq!(run(&p, &data()), Ok(4095));
        p.insert(0, ld_imm(0));
        assert_eq!(run(&p, &data()), Err(InterpError::TooLong { len: 4097 }));
    }

    #[test]
    fn falling_off_the_end() {
        assert_eq!(run(&[ld_imm(1)], &data()), Err(InterpError::FellOffEnd));
        // The kernel wants a return last even if it is unreachable.
        let p = [ret_k(0), ld_imm(1)];
        assert_eq!(run(&p, &data()), Err(InterpError::FellOffEnd));
        let p = [
            ld_abs(0),
            jump(BPF_JMP | BPF_JEQ | BPF_K, 59, 0, 1),
            ret_k(1),
            ld_imm(2),
        ];
        assert_eq!(run(&p, &data()), Err(InterpError::FellOffEnd));
    }

    #[test]
    fn opcodes_seccomp_refuses() {
        for code in [
            BPF_ALU | 0x90 | BPF_K,    // MOD
            BPF_ALU | 0x90 | BPF_X,    // MOD
            BPF_ALU | 0xb0 | BPF_K,    // (MOV, eBPF only)
            BPF_ALU | BPF_NEG | BPF_X, // NEG with a source bit
            BPF_LD | 0x08 | BPF_ABS,   // half-word load
            BPF_LD | 0x10 | BPF_ABS,   // byte load
            BPF_LD | BPF_W | 0x40,     // indirect load
            BPF_LDX | 0x10 | 0xa0,     // LDX MSH
            BPF_LDX | BPF_W | BPF_ABS, // LDX ABS
            BPF_LD | 0x08 | BPF_IMM,   // sized immediate
            BPF_RET | BPF_X,           // RET X
            BPF_JMP | BPF_JA | BPF_X,  // JA with a source bit
            BPF_JMP | 0x50 | BPF_K,    // (JNE, eBPF only)
            BPF_MISC | 0x08,           // unknown MISC
            BPF_ST | 0x60,             // ST with mode bits
            0xffff,
        ] {
            let p = [ret_k(0), stmt(code, 0), ret_a()];
            assert_eq!(
                run(&p, &data()),
                Err(InterpError::UnknownOpcode { pc: 1, code }),
                "code {code:#x}"
            );
        }
    }

    #[test]
    fn typical_filter() {
        // Arch check, kill execve, errno for openat unless arg2 has O_CREAT
        // (0x40) set, allow the rest.
        let p = [
            ld_abs(4),
            jump(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
            ret_k(RET_KILL_PROCESS),
            ld_abs(0),
            jump(BPF_JMP | BPF_JEQ | BPF_K, 59, 0, 1),
            ret_k(RET_KILL_PROCESS),
            jump(BPF_JMP | BPF_JEQ | BPF_K, 257, 0, 3),
            ld_abs(32),
            jump(BPF_JMP | BPF_JSET | BPF_K, 0x40, 1, 0),
            ret_k(RET_ERRNO | 1),
            ret_k(RET_ALLOW),
        ];
        let call = |nr: i32, arch: u32, arg2: u64| {
            let mut d = SeccompData {
                nr,
                arch,
                ..SeccompData::default()
            };
            d.args[2] = arg2;
            run(&p, &d).unwrap()
        };
        assert_eq!(call(59, AUDIT_ARCH_X86_64, 0), RET_KILL_PROCESS);
        assert_eq!(call(0, AUDIT_ARCH_AARCH64, 0), RET_KILL_PROCESS);
        assert_eq!(call(257, AUDIT_ARCH_X86_64, 0), RET_ERRNO | 1);
        assert_eq!(call(257, AUDIT_ARCH_X86_64, 0x41), RET_ALLOW);
        assert_eq!(call(0, AUDIT_ARCH_X86_64, 0), RET_ALLOW);
    }

    #[test]
    fn agrees_with_seccompiler_output() {
        use seccompiler::{
            BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition,
            SeccompFilter, SeccompRule, TargetArch,
        };
        use std::collections::BTreeMap;

        let cond = |arg, len, op, value| SeccompCondition::new(arg, len, op, value).unwrap();
        let mut rules = BTreeMap::new();
        rules.insert(1, vec![]); // unconditional
        rules.insert(
            2,
            vec![
                SeccompRule::new(vec![
                    cond(0, SeccompCmpArgLen::Qword, SeccompCmpOp::Eq, 0x1_0000_0003),
                    cond(1, SeccompCmpArgLen::Dword, SeccompCmpOp::Le, 10),
                ])
                .unwrap(),
                SeccompRule::new(vec![cond(
                    2,
                    SeccompCmpArgLen::Qword,
                    SeccompCmpOp::MaskedEq(0xff00),
                    0x1200,
                )])
                .unwrap(),
            ],
        );
        rules.insert(
            3,
            vec![SeccompRule::new(vec![cond(
                5,
                SeccompCmpArgLen::Qword,
                SeccompCmpOp::Gt,
                u64::from(u32::MAX),
            )])
            .unwrap()],
        );
        let filter = SeccompFilter::new(
            rules,
            SeccompAction::Errno(38),
            SeccompAction::Allow,
            TargetArch::x86_64,
        )
        .unwrap();
        let prog = BpfProgram::try_from(filter).unwrap();
        let allow = u32::from(SeccompAction::Allow);
        let enosys = u32::from(SeccompAction::Errno(38));
        let call = |nr: i32, args: [u64; 6]| {
            let d = SeccompData {
                nr,
                arch: AUDIT_ARCH_X86_64,
                instruction_pointer: 0,
                args,
            };
            run(&prog, &d).unwrap()
        };
        assert_eq!(call(1, [0; 6]), allow);
        assert_eq!(call(0, [0; 6]), enosys);
        assert_eq!(call(2, [0x1_0000_0003, 10, 0, 0, 0, 0]), allow);
        assert_eq!(call(2, [0x1_0000_0003, 11, 0, 0, 0, 0]), enosys);
        assert_eq!(call(2, [0x0_0000_0003, 1, 0, 0, 0, 0]), enosys);
        assert_eq!(call(2, [0, 99, 0x12ff, 0, 0, 0]), allow);
        assert_eq!(call(2, [0, 99, 0x13ff, 0, 0, 0]), enosys);
        assert_eq!(call(3, [0, 0, 0, 0, 0, 0x1_0000_0000]), allow);
        assert_eq!(call(3, [0, 0, 0, 0, 0, 0xffff_ffff]), enosys);
        // Wrong architecture: seccompiler kills the process.
        let d = SeccompData {
            nr: 1,
            arch: AUDIT_ARCH_AARCH64,
            ..SeccompData::default()
        };
        assert_eq!(run(&prog, &d), Ok(u32::from(SeccompAction::KillProcess)));
    }

    #[test]
    fn errors_display() {
        let e = InterpError::UnknownOpcode { pc: 3, code: 0x94 };
        assert_eq!(
            e.to_string(),
            "insn 3: opcode 0x0094 not allowed in seccomp"
        );
        assert!(InterpError::FellOffEnd.to_string().contains("return"));
    }
}
