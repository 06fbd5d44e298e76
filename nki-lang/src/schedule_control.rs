//! NKI 0.6's scheduling control: instruction names (`name = "..."` on a call), the extra
//! dependency edges of `kernel.with_schedule([...])` (here `#[kernel(with_schedule = [...])]`)
//! and `with nl.no_reorder():` blocks (here `no_reorder! { ... }`).
//!
//! NKI's compiler orders a kernel's instructions by their data dependences only; these are the
//! three ways its 0.6 dialect lets a kernel add order (aws-neuron-sdk,
//! `nki/guides/how-to-scheduling-apis.rst`). They live beside a program, in a side table
//! ([`ScheduleControl`]), not in its instructions: a name labels the instructions one call
//! made, an edge says that every instruction of one name completes before any instruction of
//! another starts, and a block keeps its instructions in program order.
//!
//! The rules, decided here once for the macro, the timing model and the schedule check:
//!
//! - A name labels the instructions of one call; a name is given once per program (a call
//!   unrolled twice, or a helper called twice, names two instruction groups alike:
//!   [`ControlError::DuplicateName`]). A call that makes no instruction labels nothing: NKI's
//!   tensor creation functions take `name=` as the tensor's name (`nl.ndarray(..., name="out")`
//!   in 2.26), which has no instruction to label.
//! - `("a", "b")` and `("a", ["b", "c"])`: `a` depends on `b` (and `c`), as NKI's pair
//!   `("plus1", "recip")` makes `plus1` execute after `recip`. Both names must exist
//!   ([`ControlError::UnknownName`]), differ ([`ControlError::SelfEdge`]), and `b` must come
//!   before `a` in program order ([`ControlError::Backward`]): the program is static and
//!   every engine takes its instructions in program order, so an edge against it could only be
//!   honoured by reordering the program itself, and against a data dependence from `a` to `b`
//!   it would be a cycle. An edge in program order never is one.
//! - At run time an instruction waits for the completion of the most recent execution of each
//!   instruction it depends on (in a loop, the same iteration's when both are in its body,
//!   the last iteration's when the loop came before); one that has not executed yet (a loop of
//!   no iterations) adds no wait ([`ControlPlan`]).
//! - In a `no_reorder!` block every instruction waits for the completion of the previous
//!   instruction the block executed (in a loop inside the block, the previous iteration's last
//!   for an iteration's first), so that its instructions complete in program order. A block
//!   inside a block adds nothing: the outer one orders every instruction already.

use thiserror::Error;

/// The instructions one call made, labelled with its `name = "..."`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct InstrName<'a> {
    /// The name.
    pub name: &'a str,
    /// The call's first instruction.
    pub first: u32,
    /// One past its last instruction.
    pub end: u32,
}

/// An extra dependency edge: every instruction named [`Edge::before`] completes before any
/// instruction named [`Edge::after`] starts. Both index [`ScheduleControl::names`].
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct Edge {
    /// The name that waits (the first of NKI's pair).
    pub after: u16,
    /// The name waited for (the second of NKI's pair, or one of its list).
    pub before: u16,
}

/// A `no_reorder!` block: the instructions `first..end`, kept in program order.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct Ordered {
    /// The block's first instruction.
    pub first: u32,
    /// One past its last instruction.
    pub end: u32,
}

/// A program's scheduling control, borrowed: what [`crate::Program::control`] gives.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct ScheduleControl<'a> {
    /// Named instructions, in program order.
    pub names: &'a [InstrName<'a>],
    /// Extra dependency edges.
    pub edges: &'a [Edge],
    /// `no_reorder!` blocks, in program order, none inside another.
    pub ordered: &'a [Ordered],
}

impl<'a> ScheduleControl<'a> {
    /// No names, edges or blocks.
    pub const EMPTY: ScheduleControl<'static> = ScheduleControl {
        names: &[],
        edges: &[],
        ordered: &[],
    };

    /// Whether the control adds order (an edge or a block); names alone do not.
    pub const fn orders(&self) -> bool {
        !self.edges.is_empty() || !self.ordered.is_empty()
    }

    /// The name of instruction `pc`, if a named call made it.
    pub fn name_of(&self, pc: u32) -> Option<&'a str> {
        self.names
            .iter()
            .find(|n| n.first <= pc && pc < n.end)
            .map(|n| n.name)
    }
}

/// A program's scheduling control while it is built: what the lowering records.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ControlBuf {
    /// Named instructions: name, first instruction, one past the last.
    pub names: Vec<(String, u32, u32)>,
    /// Extra dependency edges.
    pub edges: Vec<Edge>,
    /// `no_reorder!` blocks.
    pub ordered: Vec<Ordered>,
}

/// A scheduling control the rules refuse.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum ControlError {
    /// Two instruction groups with one name.
    #[error(
        "the instruction name `{name}` is given twice: an instruction name is unique in a kernel (a call unrolled by `static_range`, or inside a helper called twice, names each of its instructions alike)"
    )]
    DuplicateName {
        /// The name.
        name: String,
    },
    /// An empty name.
    #[error("an instruction name is not empty")]
    EmptyName,
    /// An edge names no instruction of the kernel.
    #[error("`with_schedule` names `{name}`, which no instruction of the kernel is called{hint}")]
    UnknownName {
        /// The name.
        name: String,
        /// A near name the kernel has, as a hint (`; did you mean ...?`), or empty.
        hint: String,
    },
    /// An edge from a name to itself.
    #[error("`with_schedule` makes `{name}` depend on itself")]
    SelfEdge {
        /// The name.
        name: String,
    },
    /// An edge against program order.
    #[error(
        "`with_schedule` makes `{after}` wait for `{before}`, which the kernel runs after it: an edge goes forward in program order (a static program's engines take their instructions in that order, and against a data dependence of `{before}` on `{after}` the edge would be a cycle); write `{before}` before `{after}` in the kernel"
    )]
    Backward {
        /// The name that would wait.
        after: String,
        /// The name it would wait for.
        before: String,
    },
    /// Past [`MAX_NAMES`] names.
    #[error("a kernel names at most {MAX_NAMES} instruction groups")]
    TooManyNames,
    /// A malformed table (a program built by hand): an index or range outside the program.
    #[error("the scheduling control refers to instructions or names the program does not have")]
    Malformed,
}

/// Most named instruction groups a program may have.
pub const MAX_NAMES: usize = u16::MAX as usize;

impl ControlBuf {
    /// Names the instructions `first..end` of one call (none: the name labels nothing, as
    /// NKI's tensor name on `ndarray` does not label an instruction).
    pub fn name(&mut self, name: &str, first: u32, end: u32) -> Result<(), ControlError> {
        if name.is_empty() {
            return Err(ControlError::EmptyName);
        }
        if end <= first {
            return Ok(());
        }
        if self.names.iter().any(|(n, ..)| n == name) {
            return Err(ControlError::DuplicateName { name: name.into() });
        }
        if self.names.len() >= MAX_NAMES {
            return Err(ControlError::TooManyNames);
        }
        self.names.push((name.into(), first, end));
        Ok(())
    }

    fn index(&self, name: &str) -> Result<usize, ControlError> {
        self.names
            .iter()
            .position(|(n, ..)| n == name)
            .ok_or_else(|| ControlError::UnknownName {
                name: name.into(),
                hint: self
                    .names
                    .iter()
                    .map(|(n, ..)| n)
                    .find(|n| n.eq_ignore_ascii_case(name))
                    .map_or_else(String::new, |n| format!("; did you mean `{n}`?")),
            })
    }

    /// Adds NKI's edge `(after, before)`: `after` depends on `before`.
    pub fn edge(&mut self, after: &str, before: &str) -> Result<(), ControlError> {
        let a = self.index(after)?;
        let b = self.index(before)?;
        if a == b {
            return Err(ControlError::SelfEdge { name: after.into() });
        }
        let (Some(na), Some(nb)) = (self.names.get(a), self.names.get(b)) else {
            return Err(ControlError::Malformed);
        };
        if nb.2 > na.1 {
            return Err(ControlError::Backward {
                after: after.into(),
                before: before.into(),
            });
        }
        let (Ok(after), Ok(before)) = (u16::try_from(a), u16::try_from(b)) else {
            return Err(ControlError::TooManyNames);
        };
        let e = Edge { after, before };
        if !self.edges.contains(&e) {
            self.edges.push(e);
        }
        Ok(())
    }

    /// Adds a `no_reorder!` block over the instructions `first..end` (none: nothing to order).
    pub fn ordered(&mut self, first: u32, end: u32) {
        if end > first {
            self.ordered.push(Ordered { first, end });
        }
    }

    /// Checks the table against a program of `instrs` instructions: every range inside it,
    /// names unique, edges between names that exist and in program order, blocks disjoint.
    pub fn check(&self, instrs: usize) -> Result<(), ControlError> {
        let inside =
            |first: u32, end: u32| first < end && usize::try_from(end).is_ok_and(|e| e <= instrs);
        for (i, (n, first, end)) in self.names.iter().enumerate() {
            if n.is_empty() {
                return Err(ControlError::EmptyName);
            }
            if !inside(*first, *end) {
                return Err(ControlError::Malformed);
            }
            if self.names[..i].iter().any(|(m, ..)| m == n) {
                return Err(ControlError::DuplicateName { name: n.clone() });
            }
        }
        for e in &self.edges {
            let (Some(a), Some(b)) = (
                self.names.get(usize::from(e.after)),
                self.names.get(usize::from(e.before)),
            ) else {
                return Err(ControlError::Malformed);
            };
            if e.after == e.before {
                return Err(ControlError::SelfEdge { name: a.0.clone() });
            }
            if b.2 > a.1 {
                return Err(ControlError::Backward {
                    after: a.0.clone(),
                    before: b.0.clone(),
                });
            }
        }
        let mut last = 0u32;
        for o in &self.ordered {
            if !inside(o.first, o.end) || o.first < last {
                return Err(ControlError::Malformed);
            }
            last = o.end;
        }
        Ok(())
    }
}

/// What the schedulers read: by instruction, the instructions whose latest execution it waits
/// for, and the `no_reorder!` block it belongs to.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ControlPlan {
    waits: Vec<Vec<u32>>,
    block: Vec<u32>,
    blocks: usize,
    orders: bool,
}

impl ControlPlan {
    /// The plan of `control` for a program of `instrs` instructions (indices outside it are
    /// ignored).
    pub fn new(control: &ScheduleControl<'_>, instrs: usize) -> ControlPlan {
        if !control.orders() {
            return ControlPlan::default();
        }
        let mut waits = vec![Vec::new(); instrs];
        for e in control.edges {
            let (Some(a), Some(b)) = (
                control.names.get(usize::from(e.after)),
                control.names.get(usize::from(e.before)),
            ) else {
                continue;
            };
            for pc in a.first..a.end {
                if let Some(w) = waits.get_mut(pc as usize) {
                    w.extend((b.first..b.end).filter(|&q| (q as usize) < instrs));
                }
            }
        }
        for w in &mut waits {
            w.sort_unstable();
            w.dedup();
        }
        let mut block = vec![u32::MAX; instrs];
        for (i, o) in control.ordered.iter().enumerate() {
            let Ok(i) = u32::try_from(i) else { break };
            for pc in o.first..o.end {
                if let Some(b) = block.get_mut(pc as usize) {
                    *b = i;
                }
            }
        }
        ControlPlan {
            waits,
            block,
            blocks: control.ordered.len(),
            orders: true,
        }
    }

    /// Whether the plan adds any order.
    pub fn orders(&self) -> bool {
        self.orders
    }

    /// The instructions whose latest execution instruction `pc` waits for.
    pub fn waits(&self, pc: usize) -> &[u32] {
        self.waits.get(pc).map_or(&[], Vec::as_slice)
    }

    /// The `no_reorder!` block instruction `pc` belongs to.
    pub fn block(&self, pc: usize) -> Option<usize> {
        self.block
            .get(pc)
            .filter(|&&b| b != u32::MAX)
            .map(|&b| b as usize)
    }

    /// Number of `no_reorder!` blocks.
    pub fn blocks(&self) -> usize {
        self.blocks
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn three() -> ControlBuf {
        let mut c = ControlBuf::default();
        c.name("a", 0, 1).unwrap();
        c.name("b", 1, 3).unwrap();
        c.name("c", 5, 6).unwrap();
        c
    }

    #[test]
    fn names_are_unique_and_label_instructions() {
        let mut c = three();
        assert_eq!(
            c.name("b", 7, 8),
            Err(ControlError::DuplicateName { name: "b".into() })
        );
        assert_eq!(c.name("d", 7, 7), Ok(()));
        assert_eq!(c.names.len(), 3);
        assert_eq!(c.name("", 7, 8), Err(ControlError::EmptyName));
    }

    #[test]
    fn edges_go_forward_between_known_names() {
        let mut c = three();
        assert!(c.edge("c", "a").is_ok());
        assert!(c.edge("b", "a").is_ok());
        assert!(matches!(
            c.edge("a", "c"),
            Err(ControlError::Backward { .. })
        ));
        assert!(matches!(
            c.edge("a", "a"),
            Err(ControlError::SelfEdge { .. })
        ));
        assert!(matches!(
            c.edge("C", "a"),
            Err(ControlError::UnknownName { hint, .. }) if hint.contains("`c`")
        ));
        assert_eq!(c.edges.len(), 2);
        assert!(c.check(6).is_ok());
        assert_eq!(c.check(5), Err(ControlError::Malformed));
    }

    #[test]
    fn the_plan_lists_each_instructions_waits() {
        let mut c = three();
        c.edge("c", "b").unwrap();
        c.ordered(1, 4);
        let names: Vec<InstrName<'_>> = c
            .names
            .iter()
            .map(|(n, f, e)| InstrName {
                name: n,
                first: *f,
                end: *e,
            })
            .collect();
        let control = ScheduleControl {
            names: &names,
            edges: &c.edges,
            ordered: &c.ordered,
        };
        let plan = ControlPlan::new(&control, 6);
        assert_eq!(plan.waits(5), &[1, 2]);
        assert!(plan.waits(0).is_empty());
        assert_eq!(plan.block(0), None);
        assert_eq!(plan.block(3), Some(0));
        assert_eq!(control.name_of(2), Some("b"));
        assert_eq!(control.name_of(4), None);
    }
}
