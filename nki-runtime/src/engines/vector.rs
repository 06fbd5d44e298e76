//! VectorE: `tensor_copy` (elementwise, with a cast) and `memset`, on SBUF and PSUM.

use nki_lang::{DType, Scalar};

use super::access::{End, Plan, fill, transfer_par, transfer_par_within};
use super::{EngineState, sbuf_for};
use crate::cpu::convert::convert;
use crate::operand::{Loc, Operands, Resolved};

fn end(r: &Resolved) -> End {
    End {
        dtype: r.dtype,
        base: r.pattern.base,
    }
}

/// `tensor_copy`: `dst[i] = cast(src[i])` element by element (in row-major order of the
/// operands' non-trivial dimensions). Same-dtype copies keep the bits.
pub(crate) fn copy(e: &mut EngineState, ops: &Operands) {
    let (dst, src) = (ops.get(0), ops.get(1));
    let plan = Plan::between(src, dst);
    let EngineState {
        isa,
        sbuf,
        psum,
        chunks,
        chunks_worker,
        worker,
        ..
    } = e;
    let (from, to) = (end(src), end(dst));
    let bufs = (chunks, chunks_worker);
    let (src_mem, dst_mem) = match (src.loc, dst.loc) {
        (Loc::Sbuf, Loc::Sbuf) => {
            let mem = sbuf_for(sbuf, dst);
            return transfer_par_within(*isa, worker.as_mut(), bufs, mem, from, to, &plan);
        }
        (Loc::Psum, Loc::Psum) => {
            let mem = psum.bytes_mut();
            return transfer_par_within(*isa, worker.as_mut(), bufs, mem, from, to, &plan);
        }
        (Loc::Sbuf, Loc::Psum) => (sbuf.bytes(), psum.bytes_mut()),
        (Loc::Psum, Loc::Sbuf) => (psum.bytes(), sbuf_for(sbuf, dst)),
        (s, d) => unreachable!("tensor_copy from {s:?} to {d:?}: the checks keep tiles on chip"),
    };
    transfer_par(
        *isa,
        worker.as_mut(),
        bufs,
        src_mem,
        (dst_mem, false),
        from,
        to,
        &plan,
    );
}

/// `memset`: every element of the destination becomes `value` converted to its dtype.
pub(crate) fn memset(e: &mut EngineState, ops: &Operands, value: Scalar) {
    let dst = ops.get(0);
    let size = dst.dtype.size() as usize;
    let mut bits = [0u8; 4];
    convert(
        e.isa,
        &value.as_f32().to_le_bytes(),
        DType::F32,
        &mut bits,
        dst.dtype,
        1,
    );
    let plan = Plan::between(dst, dst);
    let mem = match dst.loc {
        Loc::Psum => e.psum.bytes_mut(),
        Loc::Sbuf | Loc::Hbm(_) | Loc::Expr | Loc::Imm(_) => sbuf_for(&mut e.sbuf, dst),
    };
    fill(mem, dst.pattern.base, &bits[..size], &plan);
}
