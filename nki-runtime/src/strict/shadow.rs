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

/// A page no instruction wrote.
static BLANK: [Stamp; PAGE] = [Stamp {
    node: 0,
    tile: 0,
    accumulated: false,
    spans: false,
    undefined: 0,
}; PAGE];

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

    /// The stamps of the bytes `at..at + len` (unwritten past the end), one slice per page in
    /// order, each with its first byte, until `f` returns `false`; whether it never did.
    pub(super) fn each_slice(
        &self,
        at: usize,
        len: usize,
        mut f: impl FnMut(usize, &[Stamp]) -> bool,
    ) -> bool {
        let end = at.saturating_add(len);
        let mut b = at;
        while b < end {
            let lo = b % PAGE;
            let hi = PAGE.min(lo.saturating_add(end - b));
            let page = self.pages.get(b / PAGE).and_then(Option::as_deref);
            let stamps = page.unwrap_or(&BLANK).get(lo..hi).unwrap_or_default();
            if !f(b, stamps) {
                return false;
            }
            b += hi - lo;
        }
        true
    }

    /// Stamps `len` bytes from `at` (bytes past the end are ignored).
    pub(super) fn set(&mut self, at: usize, len: usize, stamp: Stamp) {
        let (pages, touched) = (&mut self.pages, &mut self.touched);
        let end = at.saturating_add(len);
        let mut b = at;
        // Page by page: the part of `at..end` in each page is one slice.
        while b < end {
            let Some(slot) = pages.get_mut(b / PAGE) else {
                return;
            };
            let page = slot.get_or_insert_with(|| {
                touched.push(b / PAGE);
                vec![Stamp::default(); PAGE].into_boxed_slice()
            });
            let lo = b % PAGE;
            let hi = PAGE.min(lo.saturating_add(end - b));
            if let Some(run) = page.get_mut(lo..hi) {
                run.fill(stamp);
            }
            b += hi - lo;
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
        // Slices per page, as `get` reads them byte by byte, past the end included.
        let mut seen = Vec::new();
        let all = s.each_slice(PAGE - 3, 2 * PAGE + 10, |b0, stamps| {
            seen.extend(stamps.iter().enumerate().map(|(i, &st)| (b0 + i, st)));
            true
        });
        assert!(all);
        let want: Vec<(usize, Stamp)> = (PAGE - 3..3 * PAGE + 7).map(|b| (b, s.get(b))).collect();
        assert_eq!(seen, want);
        assert!(!s.each_slice(0, 2 * PAGE, |b0, _| b0 < PAGE));
        s.clear();
        assert!((0..3 * PAGE).all(|b| !s.get(b).written()));
    }
}
