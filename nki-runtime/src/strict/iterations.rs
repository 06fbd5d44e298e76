//! Which iteration of which loop each executed instruction belongs to.
//!
//! Every iteration that runs is a node of a tree: its parent is the iteration of the enclosing
//! loop it runs in (the instance's top level at the root). A write remembers its node; a
//! later access compares its own node with it ([`Iterations::relation`]): program order
//! within one iteration of every loop both are in, or two different iterations of one loop,
//! which `affine_range` does not order.

use nki_lang::{InstrData, MAX_LOOP_DEPTH, MAX_PIDS, Program, VarValues};

/// An iteration context: an index into the tree (0 stands for "no write").
pub(super) type NodeId = u32;

/// The instance's top level.
const TOP: NodeId = 1;

/// One iteration of one loop.
#[derive(Copy, Clone, Debug)]
struct Node {
    /// The iteration of the enclosing loop it runs in (the top level's parent is itself).
    parent: NodeId,
    /// The loop's `LoopBegin` instruction.
    begin: u32,
    /// The loop variable's value.
    value: i64,
    /// How many loops enclose the node's instructions (0 at the top level).
    depth: u8,
}

/// How a write relates to a later access.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) enum Relation {
    /// The write ran earlier in the same iteration of every loop around both: ordered.
    Ordered,
    /// The write ran in another iteration of the loop whose `LoopBegin` is `begin`, which
    /// encloses both.
    OtherIteration {
        /// The loop.
        begin: u32,
        /// Its variable's value when the write ran.
        wrote: i64,
        /// Its value now.
        now: i64,
    },
}

/// The iteration tree of the running instance and its current node.
#[derive(Clone, Debug)]
pub(super) struct Iterations {
    /// The innermost loop enclosing each instruction (its `LoopBegin`).
    enclosing: Vec<Option<u32>>,
    nodes: Vec<Node>,
    /// The current node and its ancestors, top level first.
    chain: Vec<NodeId>,
}

impl Iterations {
    /// The loop structure of `program`, at the top level of an instance.
    pub(super) fn new(program: &Program<'_>) -> Iterations {
        let mut open: Vec<u32> = Vec::new();
        let enclosing = program
            .instrs()
            .iter()
            .zip(0u32..)
            .map(|(ins, i)| {
                let outer = open.last().copied();
                match ins.data {
                    InstrData::LoopBegin { .. } => open.push(i),
                    InstrData::LoopEnd { .. } => {
                        open.pop();
                    }
                    InstrData::Dma { .. }
                    | InstrData::Unary { .. }
                    | InstrData::Fill { .. }
                    | InstrData::Iota { .. }
                    | InstrData::Alu { .. }
                    | InstrData::Act { .. }
                    | InstrData::Act2 { .. }
                    | InstrData::Reduce { .. }
                    | InstrData::Scan { .. }
                    | InstrData::Select { .. }
                    | InstrData::Matmul { .. }
                    | InstrData::Match8 { .. }
                    | InstrData::SelectReduce { .. }
                    | InstrData::Indirect { .. }
                    | InstrData::Gather { .. }
                    | InstrData::DynCopy { .. }
                    | InstrData::Rng { .. }
                    | InstrData::Seed { .. }
                    | InstrData::RangeSelect { .. }
                    | InstrData::Shuffle { .. }
                    | InstrData::QuantizeMx { .. }
                    | InstrData::MatmulMx { .. }
                    | InstrData::LocalGather { .. }
                    | InstrData::Nonzero { .. }
                    | InstrData::DmaCompute { .. }
                    | InstrData::TopK { .. }
                    | InstrData::Register { .. } => {}
                }
                outer
            })
            .collect();
        let mut it = Iterations {
            enclosing,
            nodes: Vec::new(),
            chain: Vec::new(),
        };
        it.reset();
        it
    }

    /// Back at the top level of a new instance: every earlier node is forgotten.
    pub(super) fn reset(&mut self) {
        let top = Node {
            parent: TOP,
            begin: u32::MAX,
            value: 0,
            depth: 0,
        };
        self.nodes.clear();
        self.nodes.extend([top, top]);
        self.chain.clear();
        self.chain.push(TOP);
    }

    /// The node of instruction `pc` running with index values `vars` (entering new
    /// iterations as they start); `None` past `u32::MAX` iterations.
    pub(super) fn enter(&mut self, pc: usize, vars: &VarValues) -> Option<NodeId> {
        let mut begins = [0u32; MAX_LOOP_DEPTH];
        let mut n = 0;
        let mut at = self.enclosing.get(pc).copied().flatten();
        while let Some(b) = at {
            *begins.get_mut(n)? = b;
            n += 1;
            at = self.enclosing.get(b as usize).copied().flatten();
        }
        begins[..n].reverse();
        for (d, &begin) in begins[..n].iter().enumerate() {
            let value = vars.get(MAX_PIDS + d).copied().unwrap_or(0);
            let same = self.chain.get(d + 1).is_some_and(|&c| {
                let node = self.node(c);
                node.begin == begin && node.value == value
            });
            if !same {
                self.chain.truncate(d + 1);
                let id = NodeId::try_from(self.nodes.len()).ok()?;
                self.nodes.push(Node {
                    parent: *self.chain.last()?,
                    begin,
                    value,
                    depth: u8::try_from(d + 1).ok()?,
                });
                self.chain.push(id);
            }
        }
        self.chain.truncate(n + 1);
        self.chain.last().copied()
    }

    /// The current node's ancestor with `depth` loops around it (0: the top level).
    pub(super) fn current_at(&self, depth: usize) -> Option<NodeId> {
        self.chain.get(depth).copied()
    }

    /// How many loops enclose the body of the loop whose `LoopBegin` is `begin` (itself
    /// included).
    pub(super) fn body_depth(&self, begin: u32) -> usize {
        let mut n = 1;
        let mut at = self.enclosing.get(begin as usize).copied().flatten();
        while let Some(b) = at {
            n += 1;
            at = self.enclosing.get(b as usize).copied().flatten();
        }
        n
    }

    /// Whether node `outer` is `inner` or one of its ancestors.
    pub(super) fn encloses(&self, outer: NodeId, inner: NodeId) -> bool {
        let mut at = inner;
        while self.node(at).depth > self.node(outer).depth {
            at = self.node(at).parent;
        }
        at == outer
    }

    /// The `LoopBegin` and variable value of an iteration node.
    pub(super) fn iteration(&self, id: NodeId) -> (u32, i64) {
        let n = self.node(id);
        (n.begin, n.value)
    }

    fn node(&self, id: NodeId) -> Node {
        self.nodes.get(id as usize).copied().unwrap_or(Node {
            parent: TOP,
            begin: u32::MAX,
            value: 0,
            depth: 0,
        })
    }

    /// How a write in node `wrote` relates to an access in node `now`.
    pub(super) fn relation(&self, wrote: NodeId, now: NodeId) -> Relation {
        let (mut a, mut b) = (wrote, now);
        let (mut a_child, mut b_child) = (None, None);
        while self.node(a).depth > self.node(b).depth {
            a_child = Some(a);
            a = self.node(a).parent;
        }
        while self.node(b).depth > self.node(a).depth {
            b_child = Some(b);
            b = self.node(b).parent;
        }
        while a != b && self.node(a).depth > 0 {
            a_child = Some(a);
            b_child = Some(b);
            a = self.node(a).parent;
            b = self.node(b).parent;
        }
        match (a_child.map(|x| self.node(x)), b_child.map(|y| self.node(y))) {
            // Two iterations of one activation of a loop (siblings under one parent).
            (Some(x), Some(y)) if x.begin == y.begin && x.value != y.value => {
                Relation::OtherIteration {
                    begin: x.begin,
                    wrote: x.value,
                    now: y.value,
                }
            }
            // The write is in an iteration around the access, or in a loop that ended before
            // it (an inner loop, or an earlier loop of the same body).
            _ => Relation::Ordered,
        }
    }
}
