//! BPF emitter: a binary search over runs of syscall numbers that share an
//! action, so a call evaluates ~log2(runs) comparisons instead of walking a
//! linear chain, and the kernel's per-number cache preparation at attach time
//! stays cheap (docs/seccomp.md, BENCHMARKS.md).
//!
//! Layout:
//!   load arch; foreign arch → KILL_PROCESS        (i386 `int 0x80`, aarch32)
//!   load nr;   x32 bit set  → KILL_PROCESS        (x86_64 only)
//!   binary tree on nr → `ret ACTION` leaves, or per-syscall argument blocks.

use super::{ret_value, Entry, Spec};
use crate::policy::{Action, ArgCond, CondOp};
use seccompiler::sock_filter;

const LD_W_ABS: u16 = 0x20;
const JMP_JA: u16 = 0x05;
const JEQ_K: u16 = 0x15;
const JGE_K: u16 = 0x35;
const JSET_K: u16 = 0x45;
const RET_K: u16 = 0x06;
const ALU_AND_K: u16 = 0x54;

const OFF_NR: u32 = 0;
const OFF_ARCH: u32 = 4;
const OFF_ARGS: u32 = 16;

#[cfg(target_arch = "x86_64")]
pub const NATIVE_AUDIT_ARCH: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
pub const NATIVE_AUDIT_ARCH: u32 = 0xC000_00B7;
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
compile_error!("cordon-helper supports x86_64 and aarch64 only");
#[cfg(target_endian = "big")]
compile_error!("argument word offsets assume a little-endian seccomp_data");

/// x32 syscalls carry the x86_64 audit arch with this bit set in the number.
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

const MAX_PROGRAM: usize = 4096;

fn ins(code: u16, jt: u8, jf: u8, k: u32) -> sock_filter {
    sock_filter { code, jt, jf, k }
}

fn ret(a: Action) -> sock_filter {
    ins(RET_K, 0, 0, ret_value(a))
}

fn preamble() -> Vec<sock_filter> {
    let mut p = vec![
        ins(LD_W_ABS, 0, 0, OFF_ARCH),
        ins(JEQ_K, 1, 0, NATIVE_AUDIT_ARCH),
        ret(Action::KillProcess),
        ins(LD_W_ABS, 0, 0, OFF_NR),
    ];
    if cfg!(target_arch = "x86_64") {
        p.push(ins(JGE_K, 0, 1, X32_SYSCALL_BIT));
        p.push(ret(Action::KillProcess));
    }
    p
}

/// Jump targets inside an argument block, resolved once a rule's length is known.
#[derive(Clone, Copy)]
enum Tgt {
    Next,
    CondOk,
    RuleFail,
}

struct Pending {
    code: u16,
    k: u32,
    jt: Tgt,
    jf: Tgt,
}

fn p(code: u16, k: u32, jt: Tgt, jf: Tgt) -> Pending {
    Pending { code, k, jt, jf }
}

fn lo(arg: u8) -> u32 {
    OFF_ARGS + 8 * u32::from(arg)
}
fn hi(arg: u8) -> u32 {
    lo(arg) + 4
}

/// Code for one condition: falls through (or jumps to CondOk) when it holds,
/// jumps to RuleFail when it does not.
fn cond(c: &ArgCond) -> Vec<Pending> {
    use Tgt::*;
    let (vlo, vhi) = (c.value as u32, (c.value >> 32) as u32);
    let wide = c.width == 64;
    let mut out = Vec::new();
    match c.op {
        CondOp::Eq => {
            if wide {
                out.push(p(LD_W_ABS, hi(c.arg), Next, Next));
                out.push(p(JEQ_K, vhi, Next, RuleFail));
            }
            out.push(p(LD_W_ABS, lo(c.arg), Next, Next));
            out.push(p(JEQ_K, vlo, Next, RuleFail));
        }
        CondOp::Ne => {
            if wide {
                out.push(p(LD_W_ABS, hi(c.arg), Next, Next));
                out.push(p(JEQ_K, vhi, Next, CondOk));
            }
            out.push(p(LD_W_ABS, lo(c.arg), Next, Next));
            out.push(p(JEQ_K, vlo, RuleFail, Next));
        }
        CondOp::AnySet => {
            if wide && vhi != 0 {
                out.push(p(LD_W_ABS, hi(c.arg), Next, Next));
                let jf = if vlo != 0 { Next } else { RuleFail };
                out.push(p(JSET_K, vhi, CondOk, jf));
            }
            if vlo != 0 || !wide || vhi == 0 {
                out.push(p(LD_W_ABS, lo(c.arg), Next, Next));
                out.push(p(JSET_K, vlo, Next, RuleFail));
            }
        }
        CondOp::MaskedEq { mask } => {
            let (mlo, mhi) = (mask as u32, (mask >> 32) as u32);
            if wide {
                out.push(p(LD_W_ABS, hi(c.arg), Next, Next));
                out.push(p(ALU_AND_K, mhi, Next, Next));
                out.push(p(JEQ_K, vhi, Next, RuleFail));
            }
            out.push(p(LD_W_ABS, lo(c.arg), Next, Next));
            out.push(p(ALU_AND_K, mlo, Next, Next));
            out.push(p(JEQ_K, vlo, Next, RuleFail));
        }
    }
    out
}

fn offset(from: usize, to: usize) -> Result<u8, String> {
    let d = to - from - 1;
    u8::try_from(d).map_err(|_| format!("argument rule too long for a BPF jump ({d} > 255)"))
}

/// An argument block: each rule's conditions then `ret rule.action`; finally
/// `ret base`. The accumulator is clobbered, which is fine: every path returns.
fn block(e: &Entry) -> Result<Vec<sock_filter>, String> {
    let mut out = Vec::new();
    for (conds, action) in &e.rules {
        let mut code: Vec<(Pending, usize)> = Vec::new(); // (insn, end of its condition)
        for c in conds {
            let cc = cond(c);
            let end = code.len() + cc.len();
            code.extend(cc.into_iter().map(|i| (i, end)));
        }
        let fail = code.len() + 1; // after the rule's ret
        for (i, (pd, cond_end)) in code.iter().enumerate() {
            let resolve = |t: Tgt| match t {
                Tgt::Next => Ok(0),
                Tgt::CondOk => offset(i, *cond_end),
                Tgt::RuleFail => offset(i, fail),
            };
            out.push(ins(pd.code, resolve(pd.jt)?, resolve(pd.jf)?, pd.k));
        }
        out.push(ret(*action));
    }
    out.push(ret(e.base));
    Ok(out)
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Leaf {
    Ret(Action),
    Block(u32),
}

/// Runs of consecutive numbers with the same leaf, as (first number, leaf),
/// covering 0..=u32::MAX. Walks the entries in order (no per-number lookups).
fn runs(spec: &Spec) -> Vec<(u32, Leaf)> {
    let mut out: Vec<(u32, Leaf)> = Vec::with_capacity(2 * spec.entries.len() + 1);
    let mut push = |nr: u32, l: Leaf| {
        if out.last().map(|(_, x)| *x) != Some(l) {
            out.push((nr, l));
        }
    };
    let mut next = 0u32;
    for (nr, e) in &spec.entries {
        if *nr > next {
            push(next, Leaf::Ret(spec.default));
        }
        let l = if e.rules.is_empty() {
            Leaf::Ret(e.base)
        } else {
            Leaf::Block(*nr)
        };
        push(*nr, l);
        next = nr.saturating_add(1);
    }
    if spec.entries.is_empty() || next != 0 {
        push(next, Leaf::Ret(spec.default));
    }
    out
}

/// The binary search tree over runs, emitted in one pass into one buffer.
/// Subtree sizes are known up front, so each comparison is written with its
/// final jump offset.
struct Tree<'a> {
    runs: &'a [(u32, Leaf)],
    blocks: Vec<Vec<sock_filter>>,
    /// Emitted size of each run's leaf.
    leaf_len: Vec<usize>,
}

impl Tree<'_> {
    fn size(&self, lo: usize, hi: usize) -> usize {
        if hi - lo == 1 {
            return self.leaf_len[lo];
        }
        let m = lo + (hi - lo) / 2;
        let left = self.size(lo, m);
        let hop = usize::from(left > 255);
        1 + hop + left + self.size(m, hi)
    }

    fn emit(&self, lo: usize, hi: usize, out: &mut Vec<sock_filter>) {
        if hi - lo == 1 {
            match self.runs[lo].1 {
                Leaf::Ret(a) => out.push(ret(a)),
                Leaf::Block(_) => out.extend_from_slice(&self.blocks[lo]),
            }
            return;
        }
        let m = lo + (hi - lo) / 2;
        let left = self.size(lo, m);
        let pivot = self.runs[m].0;
        match u8::try_from(left) {
            Ok(skip) => out.push(ins(JGE_K, skip, 0, pivot)),
            Err(_) => {
                // Conditional jumps reach 255 instructions; hop over a long
                // left subtree with an unconditional jump.
                out.push(ins(JGE_K, 0, 1, pivot));
                out.push(ins(JMP_JA, 0, 0, left as u32));
            }
        }
        self.emit(lo, m, out);
        self.emit(m, hi, out);
    }
}

/// Where a jump in a [`Shared`] argument block goes: ahead within the block,
/// or to one of the shared `ret`s (by its return value).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum J {
    Ahead(u8),
    Ret(u32),
}

#[derive(Clone, PartialEq, Eq, Debug)]
struct SInsn {
    code: u16,
    k: u32,
    jt: J,
    jf: J,
}

/// An argument block without its `ret`s: each jump that landed on a `ret`
/// goes to the shared one instead. The entry is `Err(value)` when the block
/// returns at once (a rule without conditions). None (the caller then keeps
/// the plain layout) for code cond() never emits: an instruction falling
/// through into a `ret`, or an unconditional jump, whose offset would need
/// rewriting too.
fn share_rets(b: &[sock_filter]) -> Option<(Result<(), u32>, Vec<SInsn>)> {
    let is_ret = |i: usize| b[i].code == RET_K;
    if is_ret(0) {
        return Some((Err(b[0].k), Vec::new()));
    }
    // New index of each instruction once the `ret`s are gone.
    let mut idx = Vec::with_capacity(b.len());
    let mut n = 0usize;
    for i in 0..b.len() {
        idx.push(n);
        n += usize::from(!is_ret(i));
    }
    let mut out = Vec::with_capacity(n);
    for (i, insn) in b.iter().enumerate() {
        if is_ret(i) {
            continue;
        }
        if insn.code == JMP_JA {
            return None;
        }
        let is_jump = insn.code & 0x07 == 0x05;
        let to = |off: u8| -> Option<J> {
            let t = i + 1 + usize::from(off);
            Some(if is_ret(t) {
                J::Ret(b[t].k)
            } else {
                J::Ahead(u8::try_from(idx[t] - idx[i] - 1).ok()?)
            })
        };
        if !is_jump && is_ret(i + 1) {
            return None;
        }
        let (jt, jf) = if is_jump {
            (to(insn.jt)?, to(insn.jf)?)
        } else {
            (J::Ahead(0), J::Ahead(0))
        };
        out.push(SInsn {
            code: insn.code,
            k: insn.k,
            jt,
            jf,
        });
    }
    Some((Ok(()), out))
}

/// The tree with every `ret` shared: comparisons and argument blocks jump to
/// one `ret` per action at the end of the program instead of to a `ret` of
/// their own, and identical argument blocks (chmod's and creat's, say) are
/// emitted once, after the tree. Well under half the instructions of
/// [`Tree`] for the same decisions (the default profile: 265 → 142 when measured), and the
/// kernel's work at attach (checking, translating and JIT-compiling the
/// program) grows with its length. Only when every jump fits in BPF's 8-bit
/// offsets: tree, blocks and `ret`s within 256 instructions.
struct Shared<'a> {
    runs: &'a [(u32, Leaf)],
    /// For each run, its block's index in `blocks` (block leaves only).
    block_of: Vec<usize>,
    /// Distinct blocks: entry, code.
    blocks: Vec<(Result<(), u32>, Vec<SInsn>)>,
    /// Where each block starts.
    block_at: Vec<usize>,
    /// The shared `ret` values, in order, and where the first one lands.
    rets: Vec<u32>,
    ret_at: usize,
}

impl Shared<'_> {
    fn size(&self, lo: usize, hi: usize) -> usize {
        if hi - lo == 1 {
            return 0;
        }
        let m = lo + (hi - lo) / 2;
        1 + self.size(lo, m) + self.size(m, hi)
    }

    fn ret_pos(&self, k: u32) -> usize {
        self.ret_at + self.rets.iter().position(|r| *r == k).unwrap_or(0)
    }

    /// Where control goes for the subtree `lo..hi` emitted at `at`.
    fn target(&self, lo: usize, hi: usize, at: usize) -> usize {
        if hi - lo > 1 {
            return at;
        }
        match self.runs[lo].1 {
            Leaf::Ret(a) => self.ret_pos(ret_value(a)),
            Leaf::Block(_) => match self.blocks[self.block_of[lo]].0 {
                Err(k) => self.ret_pos(k),
                Ok(()) => self.block_at[self.block_of[lo]],
            },
        }
    }

    fn emit(&self, lo: usize, hi: usize, out: &mut Vec<sock_filter>) {
        if hi - lo == 1 {
            return;
        }
        let m = lo + (hi - lo) / 2;
        let pc = out.len();
        let left = self.target(lo, m, pc + 1);
        let right = self.target(m, hi, pc + 1 + self.size(lo, m));
        out.push(ins(JGE_K, off(pc, right), off(pc, left), self.runs[m].0));
        self.emit(lo, m, out);
        self.emit(m, hi, out);
    }
}

/// The offset of a forward jump from `pc` to `to`. `shared` checked the
/// program's length before emitting; a wrong offset would be a wrong filter,
/// so an impossible one aborts (step 2, before anything is applied) rather
/// than wrapping.
fn off(pc: usize, to: usize) -> u8 {
    u8::try_from(to - pc - 1).expect("jump checked by shared()")
}

/// [`Shared`]'s program, or None when its jumps would not fit.
fn shared(runs: &[(u32, Leaf)], blocks: &[Vec<sock_filter>]) -> Option<Vec<sock_filter>> {
    let mut rets: Vec<u32> = Vec::new();
    let mut add = |k: u32| {
        if !rets.contains(&k) {
            rets.push(k);
        }
    };
    let mut uniq: Vec<(Result<(), u32>, Vec<SInsn>)> = Vec::new();
    let mut block_of = vec![0; runs.len()];
    for (i, (_, l)) in runs.iter().enumerate() {
        match l {
            Leaf::Ret(a) => add(ret_value(*a)),
            Leaf::Block(_) => {
                let b = share_rets(&blocks[i])?;
                if let Err(k) = b.0 {
                    add(k);
                }
                for s in &b.1 {
                    for j in [s.jt, s.jf] {
                        if let J::Ret(k) = j {
                            add(k);
                        }
                    }
                }
                block_of[i] = match uniq.iter().position(|u| *u == b) {
                    Some(u) => u,
                    None => {
                        uniq.push(b);
                        uniq.len() - 1
                    }
                };
            }
        }
    }
    let mut prog = preamble();
    let mut t = Shared {
        runs,
        block_of,
        blocks: uniq,
        block_at: Vec::new(),
        rets,
        ret_at: 0,
    };
    let tree = t.size(0, runs.len());
    let mut at = prog.len() + tree;
    for (_, code) in &t.blocks {
        t.block_at.push(at);
        at += code.len();
    }
    t.ret_at = at;
    if at + t.rets.len() - prog.len() > 256 {
        return None;
    }
    prog.reserve_exact(at + t.rets.len() - prog.len());
    t.emit(0, runs.len(), &mut prog);
    // The tree ends where the first block (or the first `ret`) begins.
    debug_assert_eq!(prog.len(), t.block_at.first().copied().unwrap_or(t.ret_at));
    for (_, code) in &t.blocks {
        for s in code {
            let pc = prog.len();
            let j = |j: J| match j {
                J::Ahead(n) => n,
                J::Ret(k) => off(pc, t.ret_pos(k)),
            };
            prog.push(ins(s.code, j(s.jt), j(s.jf), s.k));
        }
    }
    debug_assert_eq!(prog.len(), t.ret_at);
    prog.extend(t.rets.iter().map(|k| ins(RET_K, 0, 0, *k)));
    Some(prog)
}

/// The program installed by the helper.
pub fn build(spec: &Spec) -> Result<Vec<sock_filter>, String> {
    let runs = runs(spec);
    let mut blocks = Vec::with_capacity(runs.len());
    let mut leaf_len = Vec::with_capacity(runs.len());
    for (_, leaf) in &runs {
        match leaf {
            Leaf::Ret(_) => {
                blocks.push(Vec::new());
                leaf_len.push(1);
            }
            Leaf::Block(nr) => {
                let b = block(&spec.entries[nr])?;
                leaf_len.push(b.len());
                blocks.push(b);
            }
        }
    }
    if let Some(prog) = shared(&runs, &blocks) {
        return Ok(prog);
    }
    let tree = Tree {
        runs: &runs,
        blocks,
        leaf_len,
    };
    let mut prog = preamble();
    let total = prog.len() + tree.size(0, runs.len());
    if total > MAX_PROGRAM {
        return Err(format!(
            "seccomp program has {total} instructions, more than the kernel's {MAX_PROGRAM}"
        ));
    }
    prog.reserve_exact(total - prog.len());
    tree.emit(0, runs.len(), &mut prog);
    debug_assert_eq!(prog.len(), total);
    Ok(prog)
}

/// A deliberately naive layout (one equality test per listed number), used
/// by the tests as a reference for `build`.
pub fn build_linear(spec: &Spec) -> Result<Vec<sock_filter>, String> {
    let mut prog = preamble();
    for (nr, e) in &spec.entries {
        let b = block(e)?;
        let skip = u8::try_from(b.len()).map_err(|_| "block too long".to_string())?;
        prog.push(ins(LD_W_ABS, 0, 0, OFF_NR));
        prog.push(ins(JEQ_K, 0, skip, *nr));
        prog.extend(b);
    }
    prog.push(ret(spec.default));
    Ok(prog)
}

/// Greatest number of instructions evaluated on a path of `prog` that ends
/// in a verdict that lets the call run (`ALLOW`, `LOG`), and on one that
/// ends in any other (an errno, a kill, a trap): the worst case for an
/// allowed and for a denied syscall. 0 for a kind no path ends in. Like
/// [`worst_case_path`], an upper bound over every path, feasible or not.
pub fn worst_case_by_verdict(prog: &[sock_filter]) -> (usize, usize) {
    fn runs(k: u32) -> bool {
        matches!(k & 0xffff_0000, 0x7fff_0000 | 0x7ffc_0000)
    }
    fn longer((a, d): (usize, usize)) -> (usize, usize) {
        (if a > 0 { a + 1 } else { 0 }, if d > 0 { d + 1 } else { 0 })
    }
    fn walk(
        prog: &[sock_filter],
        pc: usize,
        memo: &mut Vec<Option<(usize, usize)>>,
    ) -> (usize, usize) {
        if pc >= prog.len() {
            return (0, 0);
        }
        if let Some(v) = memo[pc] {
            return v;
        }
        let i = &prog[pc];
        let v = match i.code {
            RET_K if runs(i.k) => (1, 0),
            // Any other return, RET_A included, counts as a refusal.
            c if c & 0x07 == 0x06 => (0, 1),
            JMP_JA => longer(walk(prog, pc + 1 + i.k as usize, memo)),
            c if c & 0x07 == 0x05 => {
                let (ta, td) = walk(prog, pc + 1 + i.jt as usize, memo);
                let (fa, fd) = walk(prog, pc + 1 + i.jf as usize, memo);
                longer((ta.max(fa), td.max(fd)))
            }
            _ => longer(walk(prog, pc + 1, memo)),
        };
        memo[pc] = Some(v);
        v
    }
    let mut memo = vec![None; prog.len()];
    walk(prog, 0, &mut memo)
}

/// Greatest number of instructions any syscall evaluates in `prog` (the tree
/// depth plus the longest block), computed by walking every path.
pub fn worst_case_path(prog: &[sock_filter]) -> usize {
    fn walk(prog: &[sock_filter], pc: usize, memo: &mut Vec<Option<usize>>) -> usize {
        if pc >= prog.len() {
            return 0;
        }
        if let Some(v) = memo[pc] {
            return v;
        }
        let i = &prog[pc];
        let v = 1 + match i.code {
            RET_K => 0,
            JMP_JA => walk(prog, pc + 1 + i.k as usize, memo),
            c if c & 0x07 == 0x05 => walk(prog, pc + 1 + i.jt as usize, memo).max(walk(
                prog,
                pc + 1 + i.jf as usize,
                memo,
            )),
            _ => walk(prog, pc + 1, memo),
        };
        memo[pc] = Some(v);
        v
    }
    let mut memo = vec![None; prog.len()];
    walk(prog, 0, &mut memo)
}
