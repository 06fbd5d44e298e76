//! The shadow of on-chip memory: for each byte, which tile wrote it last, in which iteration,
//! and whether by accumulation.

use super::iterations::NodeId;

/// What strict mode knows about one byte of SBUF or PSUM.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Stamp {
    /// The iteration context of the last write ([`super::iterations`]); 0: never written in
    /// this instance.
    pub node: NodeId,
    /// The tile the last write went through (addresses are reused by tiles that are not live
    /// at the same time).
    pub tile: u16,
    /// Whether the last write accumulated (`+=`, an accumulation group).
    pub accumulated: bool,
    /// Whether that accumulation is a sum over the iterations of a loop: then `node` is the
    /// iteration of that loop (the outermost it runs over) that wrote last.
    pub spans: bool,
    /// 0 when the value is defined; else 1 + the instruction that computed it, row by row,
    /// from bytes no instruction wrote (the value is whatever SBUF or PSUM held).
    pub undefined: u32,
}

impl Stamp {
    /// Whether any instruction of this instance wrote the byte.
    pub(super) const fn written(&self) -> bool {
        self.node != 0
    }
}

/// Bytes per page of the shadow; pages are allocated when first written.
const PAGE: usize = 4096;

/// A [`Stamp`] per byte of one memory, in pages allocated on first write (a kernel's tiles
/// cover a small part of SBUF).
#[derive(Clone, Debug)]
pub(super) struct Shadow {
    pages: Vec<Option<Box<[Stamp]>>>,
    /// The pages written since the last [`Shadow::clear`].
    touched: Vec<usize>,
}

impl Shadow {
    /// Nothing written, for a memory of `bytes` bytes.
    pub(super) fn new(bytes: usize) -> Shadow {
        Shadow {
            pages: (0..bytes.div_ceil(PAGE)).map(|_| None).collect(),
            touched: Vec::new(),
        }
    }

    /// The stamp of byte `at` (unwritten past the end).
    pub(super) fn get(&self, at: usize) -> Stamp {
        self.pages
            .get(at / PAGE)
            .and_then(Option::as_deref)
            .and_then(|p| p.get(at % PAGE))
            .copied()
            .unwrap_or_default()
    }

    /// Stamps `len` bytes from `at` (bytes past the end are ignored).
    pub(super) fn set(&mut self, at: usize, len: usize, stamp: Stamp) {
        let (pages, touched) = (&mut self.pages, &mut self.touched);
        for b in at..at.saturating_add(len) {
            let Some(slot) = pages.get_mut(b / PAGE) else {
                return;
            };
            let page = slot.get_or_insert_with(|| {
                touched.push(b / PAGE);
                vec![Stamp::default(); PAGE].into_boxed_slice()
            });
            if let Some(s) = page.get_mut(b % PAGE) {
                *s = stamp;
            }
        }
    }

    /// Forgets every write (the pages stay allocated for the next instance).
    pub(super) fn clear(&mut self) {
        for i in self.touched.drain(..) {
            if let Some(Some(page)) = self.pages.get_mut(i) {
                page.fill(Stamp::default());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_are_kept_per_byte_across_pages_and_cleared() {
        let mut s = Shadow::new(3 * PAGE);
        let a = Stamp {
            node: 2,
            tile: 7,
            accumulated: true,
            spans: false,
            undefined: 0,
        };
        s.set(PAGE - 2, 4, a);
        assert_eq!(s.get(PAGE - 3), Stamp::default());
        for b in PAGE - 2..PAGE + 2 {
            assert_eq!(s.get(b), a);
        }
        assert!(!s.get(PAGE + 2).written());
        // Past the end: ignored, and read as unwritten.
        s.set(3 * PAGE - 1, 10, a);
        assert_eq!(s.get(3 * PAGE + 5), Stamp::default());
        s.clear();
        assert!((0..3 * PAGE).all(|b| !s.get(b).written()));
    }
}
